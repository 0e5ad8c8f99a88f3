/* clock.h — the monotonic clock that timings and deadlines read. */
#ifndef MTC_CLOCK_H
#define MTC_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t mtc_clock_ns(void);

#endif
