/* helpers.h — small helpers the C tests share: clocks, leaves, random bytes. */
#ifndef MTC_TEST_HELPERS_H
#define MTC_TEST_HELPERS_H

/* clock_gettime and nanosleep are POSIX: the build compiles the tests with
 * -D_GNU_SOURCE, so <time.h> declares them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mtc.h"

/* Milliseconds on the monotonic clock. */
static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void sleep_ms(int ms) {
  struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

/* A host pointer as a leaf address. */
static inline uint64_t host_address(const void *p) {
  return (uint64_t)(uintptr_t)p;
}

/* A contiguous leaf with only these fields set. */
static inline mtc_leaf make_leaf(uint64_t address, uint64_t bytes,
                                 uint32_t element_size, int32_t device) {
  mtc_leaf leaf = {0};
  leaf.address = address;
  leaf.bytes = bytes;
  leaf.device = device;
  leaf.element_size = element_size;
  return leaf;
}

/* n bytes (malloc'd, at least 1) from a fixed-seed xorshift, so failures
 * reproduce; the caller frees them. */
static inline uint8_t *random_bytes(size_t n) {
  static uint64_t state = 0x243F6A8885A308D3ull;
  uint8_t *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    p[i] = (uint8_t)(state >> 24);
  }
  return p;
}

/* The driver a device test runs against: its first argument (then also set
 * as MTC_CUDA_DRIVER, which libmtc reads), else MTC_CUDA_DRIVER; NULL, after
 * saying so, when there is neither. */
static inline const char *driver_argument(int argc, char **argv, const char *suite) {
  if (argc > 1) setenv("MTC_CUDA_DRIVER", argv[1], 1);
  const char *driver = getenv("MTC_CUDA_DRIVER");
  if (driver == NULL) printf("%s: pass the emulated driver's path (or set MTC_CUDA_DRIVER)\n", suite);
  return driver;
}

#endif
