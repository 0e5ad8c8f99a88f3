/* check.h — the C tests' assertion helper: each failed check prints one
 * line (file:line, the expression, and libmtc's last error) and the run
 * exits non-zero at the end. */
#ifndef MTC_TEST_CHECK_H
#define MTC_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtc.h"

static int check_failures;
static int check_count;
static int check_skips;

/* A part of a suite that cannot check anything where it runs (a real
 * driver, one device): says so, and the summary counts it as skipped,
 * never as passed. */
static inline void check_skip(const char *what, const char *why) {
  check_skips++;
  printf("SKIP %s: %s\n", what, why);
}

#define CHECK(cond)                                                        \
  do {                                                                     \
    check_count++;                                                         \
    if (!(cond)) {                                                         \
      check_failures++;                                                    \
      printf("FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__,     \
             #cond, mtc_last_error());                                     \
    }                                                                      \
  } while (0)

/* A call that must return the given status. */
#define CHECK_STATUS(call, expected)                                       \
  do {                                                                     \
    check_count++;                                                         \
    mtc_status check_got_ = (call);                                        \
    if (check_got_ != (expected)) {                                        \
      check_failures++;                                                    \
      printf("FAIL %s:%d: %s returned %s, expected %s (last error: %s)\n", \
             __FILE__, __LINE__, #call, mtc_status_name(check_got_),      \
             mtc_status_name(expected), mtc_last_error());                 \
    }                                                                      \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, MTC_OK)

#define CHECK_EQ_U64(a, b)                                                 \
  do {                                                                     \
    check_count++;                                                         \
    uint64_t check_a_ = (uint64_t)(a), check_b_ = (uint64_t)(b);           \
    if (check_a_ != check_b_) {                                            \
      check_failures++;                                                    \
      printf("FAIL %s:%d: %s == %s: %" PRIu64 " != %" PRIu64 "\n",        \
             __FILE__, __LINE__, #a, #b, check_a_, check_b_);              \
    }                                                                      \
  } while (0)

/* The message must contain the text. */
#define CHECK_CONTAINS(message, text)                                      \
  do {                                                                     \
    check_count++;                                                         \
    const char *check_m_ = (message);                                      \
    if (check_m_ == NULL || strstr(check_m_, (text)) == NULL) {            \
      check_failures++;                                                    \
      printf("FAIL %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,    \
             __LINE__, check_m_ ? check_m_ : "(null)", (text));            \
    }                                                                      \
  } while (0)

/* Ends main: prints a summary and returns the exit status. */
static inline int check_summary(const char *suite) {
  if (check_failures) {
    printf("%s: %d of %d checks FAILED\n", suite, check_failures,
           check_count);
    return 1;
  }
  if (check_skips) {
    printf("%s: all %d checks passed, %d parts skipped\n", suite, check_count, check_skips);
  } else {
    printf("%s: all %d checks passed\n", suite, check_count);
  }
  return 0;
}

/* The library's counters (mtc_get_stats), checked to be readable. */
static inline mtc_stats checked_stats(void) {
  mtc_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_OK(mtc_get_stats(&s));
  return s;
}

#endif
