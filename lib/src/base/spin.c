/* spin.c — MTC_SPIN_US, read once. */
#include "base/spin.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/env.h"

#define DEFAULT_SPIN_US 50
#define MAX_SPIN_US 10000
/* With fewer cores a spinning thread takes the CPU from the one it waits for. */
#define MIN_CORES_TO_SPIN 4

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t spin_ns;

static void read_setting(void) {
  uint64_t us =
      sysconf(_SC_NPROCESSORS_ONLN) >= MIN_CORES_TO_SPIN ? DEFAULT_SPIN_US : 0;
  uint64_t value;
  /* A malformed value ("-1", "5us") keeps the default: a tuning knob, not
   * worth a failure. */
  if (mtc_parse_count(getenv("MTC_SPIN_US"), &value)) {
    us = value > MAX_SPIN_US ? MAX_SPIN_US : value;
  }
  spin_ns = us * 1000u;
}

uint64_t mtc_spin_ns(void) {
  pthread_once(&once, read_setting);
  return spin_ns;
}
