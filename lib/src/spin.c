/* spin.c — MTC_SPIN_US, read once. */
#include "spin.h"

#include <pthread.h>
#include <stdlib.h>

#define DEFAULT_SPIN_US 50
#define MAX_SPIN_US 10000

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t spin_ns;

static void read_setting(void) {
  const char *text = getenv("MTC_SPIN_US");
  unsigned long us = DEFAULT_SPIN_US;
  if (text != NULL && text[0] != '\0') {
    char *end = NULL;
    unsigned long value = strtoul(text, &end, 10);
    /* A malformed value keeps the default: a tuning knob, not worth a failure. */
    if (end != NULL && *end == '\0') us = value > MAX_SPIN_US ? MAX_SPIN_US : value;
  }
  spin_ns = (uint64_t)us * 1000u;
}

uint64_t mtc_spin_ns(void) {
  pthread_once(&once, read_setting);
  return spin_ns;
}
