/* spin.c — MTC_SPIN_US, read once. */
#include "base/spin.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define DEFAULT_SPIN_US 50
#define MAX_SPIN_US 10000
/* With fewer cores a spinning thread takes the CPU from the one it waits for. */
#define MIN_CORES_TO_SPIN 4

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t spin_ns;

static void read_setting(void) {
  const char *text = getenv("MTC_SPIN_US");
  unsigned long us =
      sysconf(_SC_NPROCESSORS_ONLN) >= MIN_CORES_TO_SPIN ? DEFAULT_SPIN_US : 0;
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
