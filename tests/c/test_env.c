/* test_env.c — the environment knobs parse strictly: a malformed value is
 * ignored as if unset, switches take 1/true/yes/on and 0/false/no/off. Each
 * knob is read once per process, so each setting is tried in a forked
 * child. */
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
#include "base/spin.h"
#include "check.h"
#include "run/trace.h"
#include "stage/staging_pool.h"

#define MIB ((uint64_t)1 << 20)

static void test_flags(void) {
  const char *on[] = {"1", "true", "yes", "on", "TRUE", "On", "YES"};
  const char *off[] = {"0", "false", "no", "off", "FALSE", "Off"};
  const char *neither[] = {"", "2", "-1", "enabled", " 1", "1 ", "truee", "o", "01"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) CHECK(mtc_parse_flag(on[i]) == 1);
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) CHECK(mtc_parse_flag(off[i]) == 0);
  for (size_t i = 0; i < sizeof neither / sizeof neither[0]; i++) CHECK(mtc_parse_flag(neither[i]) == -1);
  CHECK(mtc_parse_flag(NULL) == -1);
}

static void test_counts(void) {
  uint64_t value = 7;
  CHECK(mtc_parse_count("0", &value) && value == 0);
  CHECK(mtc_parse_count("50", &value) && value == 50);
  CHECK(mtc_parse_count("18446744073709551615", &value) && value == UINT64_MAX);
  const char *bad[] = {"", "-1", "+5", " 5", "5 ", "5us", "0x10", "1e3", "18446744073709551616", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    value = 7;
    CHECK(!mtc_parse_count(bad[i], &value) && value == 7);
  }
  CHECK(!mtc_parse_count(NULL, &value));
}

static void test_bytes(void) {
  uint64_t bytes = 0;
  CHECK(mtc_parse_bytes("3m", &bytes) && bytes == 3 * MIB);
  CHECK(mtc_parse_bytes("3M", &bytes) && bytes == 3 * MIB);
  CHECK(mtc_parse_bytes("2097152", &bytes) && bytes == 2 * MIB);
  CHECK(mtc_parse_bytes("16k", &bytes) && bytes == 16384);
  CHECK(mtc_parse_bytes("1g", &bytes) && bytes == 1024 * MIB);
  CHECK(mtc_parse_bytes("16777215t", &bytes) && bytes == ((uint64_t)16777215 << 40));
  const char *bad[] = {"", "-1", "-3m", " 3m", "3m ", "3mb", "3 m", "m", "k3", "16777216t", "3x", "+3m",
                       "123456789012345678901234"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    bytes = 7;
    CHECK(!mtc_parse_bytes(bad[i], &bytes) && bytes == 7);
  }
}

/* What a knob reads in a fresh process with `name` set to `value`. */
typedef uint64_t (*reader)(void);

static uint64_t read_in_child(const char *name, const char *value, reader knob) {
  int fds[2];
  if (pipe(fds) != 0) return UINT64_MAX;
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    setenv(name, value, 1);
    uint64_t got = knob();
    ssize_t written = write(fds[1], &got, sizeof got);
    _exit(written == (ssize_t)sizeof got ? 0 : 1);
  }
  close(fds[1]);
  uint64_t got = UINT64_MAX;
  if (read(fds[0], &got, sizeof got) != (ssize_t)sizeof got) got = UINT64_MAX;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return got;
}

static uint64_t read_spin(void) { return mtc_spin_ns(); }
static uint64_t read_trace(void) { return mtc_trace_open(0) != NULL; }
static uint64_t read_staging_threads(void) { return mtc_staging_pool_size(); }
static uint64_t read_pinned_limit(void) {
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  return mtc_get_stats(&stats) == MTC_OK ? stats.pinned_limit_bytes : 0;
}

static void test_spin(void) {
  uint64_t fallback = read_in_child("MTC_SPIN_US", "", read_spin);
  CHECK_EQ_U64(read_in_child("MTC_SPIN_US", "20", read_spin), 20000);
  CHECK_EQ_U64(read_in_child("MTC_SPIN_US", "0", read_spin), 0);
  CHECK_EQ_U64(read_in_child("MTC_SPIN_US", "99999", read_spin), 10000u * 1000u); /* capped */
  /* strtoul read "-1" as the largest value: it spun for the cap, not the default. */
  const char *bad[] = {"-1", "+20", " 20", "20us", "0x20", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_U64(read_in_child("MTC_SPIN_US", bad[i], read_spin), fallback);
  }
}

static void test_trace(void) {
  const char *on[] = {"1", "true", "yes", "on", "ON"};
  const char *off[] = {"0", "false", "no", "off", "False", "", "2", "maybe"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) CHECK_EQ_U64(read_in_child("MTC_TRACE", on[i], read_trace), 1);
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) CHECK_EQ_U64(read_in_child("MTC_TRACE", off[i], read_trace), 0);
}

static void test_staging_threads(void) {
  uint64_t fallback = read_in_child("MTC_STAGING_THREADS", "", read_staging_threads);
  CHECK_EQ_U64(read_in_child("MTC_STAGING_THREADS", "3", read_staging_threads), 3);
  CHECK_EQ_U64(read_in_child("MTC_STAGING_THREADS", "100000", read_staging_threads), 256);
  const char *bad[] = {"0", "-3", "+3", " 3", "3 ", "three"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_U64(read_in_child("MTC_STAGING_THREADS", bad[i], read_staging_threads), fallback);
  }
}

static void test_pinned_limit(void) {
  uint64_t fallback = read_in_child("MTC_PINNED_LIMIT", "", read_pinned_limit);
  CHECK(fallback >= MIB);
  CHECK_EQ_U64(read_in_child("MTC_PINNED_LIMIT", "3m", read_pinned_limit), 3 * MIB);
  CHECK_EQ_U64(read_in_child("MTC_PINNED_LIMIT", "5242880", read_pinned_limit), 5 * MIB);
  const char *bad[] = {"-3m", " 3m", "3mb", "1k" /* below 1 MiB */, "2048t" /* above 1 PiB */, "16777216t"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_U64(read_in_child("MTC_PINNED_LIMIT", bad[i], read_pinned_limit), fallback);
  }
}

int main(void) {
  test_flags();
  test_counts();
  test_bytes();
  test_spin();
  test_trace();
  test_staging_threads();
  test_pinned_limit();
  return check_summary("test_env");
}
