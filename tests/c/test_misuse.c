/* test_misuse.c — against the emulated driver (its path in argv[1]):
 *  - a call a failed plan rejects (a second submit, adding leaves or
 *    streams, reading results) leaves the plan's error as it was: poll and
 *    wait still report the status that ended it, with its own message;
 *  - a process that calls exit() or quick_exit() while the background
 *    thread stages its leaves, and whose own exit handler then unmaps that
 *    memory, ends cleanly: libmtc's exit handler, registered after the
 *    program's, runs first and stops every plan's reads (each case in a
 *    forked child, several times). */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"

#define SUITE "test_misuse"

static void failed_plan_keeps_its_error(void) {
  static float data[64];
  mtc_leaf leaves[2] = {make_leaf(host_address(data), sizeof data, 4, MTC_DEVICE_CPU),
                        make_leaf(host_address(data), 16, 4, 7)}; /* cuda:7: not on this machine */
  for (uint32_t background = 0; background < 2; background++) {
    mtc_options o = MTC_OPTIONS_INIT;
    o.use_background_thread = background;
    mtc_plan *plan = NULL;
    CHECK_OK(mtc_plan_create(0, &o, &plan));
    CHECK_OK(mtc_plan_add_leaves(plan, leaves, 2));
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_NO_DEVICE);
    char first[512];
    snprintf(first, sizeof first, "%s", mtc_plan_last_error(plan));
    CHECK_CONTAINS(first, "cuda:7");
    CHECK(mtc_plan_error_leaf(plan) == 1);

    /* Each rejected: its own message on the thread, the plan's unchanged. */
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_STATE);
    CHECK_CONTAINS(mtc_last_error(), "already submitted");
    CHECK_STATUS(mtc_plan_add_leaves(plan, leaves, 1), MTC_ERR_INVALID_STATE);
    CHECK_STATUS(mtc_plan_add_leaves(plan, NULL, 3), MTC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mtc_plan_set_stream(plan, 0, 0), MTC_ERR_INVALID_STATE);
    mtc_leaf_result result;
    CHECK_STATUS(mtc_plan_results(plan, 0, 1, &result), MTC_ERR_INVALID_STATE);
    CHECK(strcmp(mtc_plan_last_error(plan), first) == 0);
    CHECK(mtc_plan_error_leaf(plan) == 1);

    CHECK_STATUS(mtc_plan_poll(plan), MTC_ERR_NO_DEVICE);
    CHECK(strcmp(mtc_last_error(), first) == 0);
    CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_NO_DEVICE);
    CHECK(strcmp(mtc_last_error(), first) == 0);
    CHECK(strcmp(mtc_plan_last_error(plan), first) == 0);
    mtc_plan_release(plan);
  }
}

/* The child's leaves: mapped memory its own exit handler unmaps. */
enum { LEAVES = 24, LEAF_BYTES = 4 << 20 };
static unsigned char *mapped;

static void unmap_leaves(void) { munmap(mapped, (size_t)LEAVES * LEAF_BYTES); }

/* In a child: starts copies of LEAVES leaves whose staging waits for slow
 * DMAs, then exits (how: 0 exit, 1 quick_exit) while they stage. */
static void exit_while_staging(void (*set_delay)(unsigned long long), int how) {
  mapped = mmap(NULL, (size_t)LEAVES * LEAF_BYTES, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) _exit(10);
  memset(mapped, 7, (size_t)LEAVES * LEAF_BYTES);
  /* Registered before libmtc's first plan: runs after libmtc's handler. */
  if (how == 0) atexit(unmap_leaves);
  else at_quick_exit(unmap_leaves);
  set_delay(2000); /* each 1 MiB piece's DMA: 2 ms; staging lasts ~200 ms */
  mtc_options o = MTC_OPTIONS_INIT;
  o.staging_piece_bytes = 1 << 20;
  for (int i = 0; i < LEAVES; i++) {
    o.use_pinned_staging = (uint32_t)(i % 2 == 0);
    mtc_plan *plan = NULL;
    if (mtc_plan_create(i % 2, &o, &plan) != MTC_OK) _exit(11);
    mtc_leaf leaf = make_leaf(host_address(mapped + (size_t)i * LEAF_BYTES), LEAF_BYTES, 4,
                              MTC_DEVICE_CPU);
    if (mtc_plan_add_leaves(plan, &leaf, 1) != MTC_OK) _exit(12);
    if (mtc_plan_submit(plan) != MTC_OK) _exit(13);
  }
  sleep_ms(20);
  if (how == 0) exit(0);
  quick_exit(0);
}

static void exit_stops_reads(const char *driver) {
  void *handle = fake_open(driver);
  void (*set_delay)(unsigned long long) = NULL;
  if (handle != NULL) FAKE_SYM(handle, set_delay, "fake_cuda_set_copy_delay_us");
  CHECK(set_delay != NULL);
  if (set_delay == NULL) return;
  for (int how = 0; how < 2; how++) {
    for (int run = 0; run < 5; run++) {
      fflush(stdout);
      pid_t child = fork();
      if (child == 0) exit_while_staging(set_delay, how);
      int status = 0;
      CHECK(waitpid(child, &status, 0) == child);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("%s: the child that %s while staging ended with %s %d\n", SUITE,
               how == 0 ? "called exit()" : "called quick_exit()",
               WIFSIGNALED(status) ? "signal" : "exit code",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      }
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  /* First, while this process has not used libmtc: each child starts its
   * threads and registers its exit handlers itself, in that order. */
  exit_stops_reads(driver);
  failed_plan_keeps_its_error();
  return check_summary(SUITE);
}
