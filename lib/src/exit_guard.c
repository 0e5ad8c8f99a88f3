/* exit_guard.c — reads of caller memory announce themselves in a counter;
 * mtc_prepare_exit raises a flag, then waits for the counter to reach 0.
 * Both sides use sequentially consistent atomics, so either a read that
 * begins sees the flag and backs out, or the exit hook sees the read and
 * waits for it. */
#include "exit_guard.h"

#include <stdatomic.h>
#include <time.h>

#include "error.h"

static atomic_int exiting;
static atomic_long readers;

mtc_status mtc_host_read_begin(void) {
  atomic_fetch_add(&readers, 1);
  if (atomic_load(&exiting)) {
    atomic_fetch_sub(&readers, 1);
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "the process is exiting: mtc_prepare_exit stopped "
                         "all reads of host memory");
  }
  return MTC_OK;
}

void mtc_host_read_end(void) { atomic_fetch_sub(&readers, 1); }

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

MTC_API mtc_status mtc_prepare_exit(uint32_t timeout_ms) {
  atomic_store(&exiting, 1);
  uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
  /* Reads are memcpys and driver calls: short, so a poll is enough. */
  while (atomic_load(&readers) > 0) {
    if (monotonic_ns() >= deadline) {
      return mtc_error_set(MTC_IN_PROGRESS,
                           "mtc_prepare_exit: a read of host memory was still "
                           "in progress after %u ms", timeout_ms);
    }
    struct timespec pause = {0, 50 * 1000};
    nanosleep(&pause, NULL);
  }
  return MTC_OK;
}
