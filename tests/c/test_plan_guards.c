/* test_plan_guards.c — two guards of a plan's life, made certain with the
 * emulated driver's delays (its path in argv[1]):
 *
 *  - mtc_plan_release waits for a wait on another thread (an FFI call on a
 *    runtime's pool) to leave the plan before freeing it: the plan counts
 *    its waiters. The wait is kept inside cuEventSynchronize
 *    (fake_cuda_set_sync_linger_us) while the release runs, and the release
 *    must not return before it has left.
 *  - A plan carried out on the calling thread first drains the background
 *    queue, so plans reach the copy streams in submission order. The
 *    background thread is kept inside a copy from pageable memory (which
 *    blocks for the copy delay) while a second plan waits in its queue and
 *    a third, into the same destination, is submitted on this thread (with
 *    useBackgroundThread off, then with a stream of the caller's on the
 *    target): the third must land last. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"
#include "readback.h"

#define SUITE "test_plan_guards"

/* Far longer than the test needs to act while a call is in the driver. */
#define HOLD_US 1000000ull

static struct {
  void (*set_copy_delay_us)(unsigned long long);
  unsigned long long (*copy_count)(void);
  void (*set_sync_linger_us)(unsigned long long);
  int (*synchronizes_in_progress)(void);
} fake;

static uint8_t source[4096];

/* A copy of `bytes` bytes at `host` into device memory at `address` on
 * cuda:0, submitted with `options`; NULL stream: none of the caller's. */
static mtc_plan *copy_into(const void *host, uint64_t bytes, uint64_t address, const mtc_options *options,
                           uint64_t stream) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, options, &plan));
  mtc_leaf src = make_leaf(host_address(host), bytes, 1, MTC_DEVICE_CPU);
  mtc_leaf dst = make_leaf(address, bytes, 1, 0);
  CHECK_OK(mtc_plan_add_leaves_into(plan, &src, &dst, 1));
  if (stream != 0) CHECK_OK(mtc_plan_set_stream(plan, 0, stream));
  CHECK_OK(mtc_plan_submit(plan));
  return plan;
}

static atomic_int wait_returned;

static void *wait_plan(void *plan) {
  mtc_status status = mtc_plan_wait(plan);
  atomic_store(&wait_returned, 1);
  return (void *)(uintptr_t)status;
}

/* A wait on another thread is inside cuEventSynchronize (the copy is over,
 * the wait has not returned) when this thread releases the plan: the
 * release returns only after the wait has left the driver and the plan. */
static void release_waits_for_waiter(void) {
  mtc_stats before = checked_stats();
  mtc_options here = MTC_OPTIONS_INIT;
  here.use_background_thread = 0; /* in flight when submit returns */
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, &here, &plan));
  mtc_leaf leaf = make_leaf(host_address(source), sizeof source, 4, MTC_DEVICE_CPU);
  CHECK_OK(mtc_plan_add_leaves(plan, &leaf, 1));
  CHECK_OK(mtc_plan_submit(plan));
  fake.set_sync_linger_us(HOLD_US);
  atomic_store(&wait_returned, 0);
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, wait_plan, plan) == 0);
  int inside = 0;
  while (!(inside = fake.synchronizes_in_progress() > 0) && !atomic_load(&wait_returned)) sched_yield();
  CHECK(inside); /* a second of linger: the wait is seen in the driver */
  if (inside) {
    /* The copy is over: this poll sees it, so the release itself has no
     * device work to wait for and goes straight to the waiter count. */
    CHECK_OK(mtc_plan_poll_device(plan));
    mtc_plan_release(plan);
    /* The wait left the driver before it let go of the plan. */
    CHECK(fake.synchronizes_in_progress() == 0);
  }
  void *status = NULL;
  pthread_join(thread, &status);
  CHECK_STATUS((mtc_status)(uintptr_t)status, MTC_OK);
  if (!inside) mtc_plan_release(plan);
  fake.set_sync_linger_us(0);
  CHECK_EQ_U64(checked_stats().plans_live, before.plans_live);
}

/* Plans on the calling thread do not overtake plans still queued for the
 * background thread. */
static void submission_order(int with_stream) {
  mtc_block *busy_block = NULL, *target = NULL;
  const uint64_t busy_bytes = (uint64_t)1 << 20;
  CHECK_OK(mtc_device_block_alloc(0, busy_bytes, 0, &busy_block));
  CHECK_OK(mtc_device_block_alloc(0, 64, MTC_ALLOC_ZERO, &target));
  if (busy_block == NULL || target == NULL) return;
  mtc_block_info busy_info = {.struct_size = sizeof busy_info}, target_info = {.struct_size = sizeof target_info};
  CHECK_OK(mtc_block_get_info(busy_block, &busy_info));
  CHECK_OK(mtc_block_get_info(target, &target_info));
  uint8_t *busy_bytes_host = calloc(1, (size_t)busy_bytes);
  uint8_t earlier[64], later[64];
  memset(earlier, 0xE1, sizeof earlier);
  memset(later, 0x1A, sizeof later);

  /* The background thread copies from pageable memory, which keeps it in
   * the driver for the copy's modelled second. */
  mtc_options background = MTC_OPTIONS_INIT, pageable = MTC_OPTIONS_INIT, here = MTC_OPTIONS_INIT;
  pageable.use_pinned_staging = 0;
  here.use_background_thread = 0;
  unsigned long long copies = fake.copy_count();
  fake.set_copy_delay_us(HOLD_US);
  mtc_plan *busy = copy_into(busy_bytes_host, busy_bytes, busy_info.address, &pageable, 0);
  while (fake.copy_count() == copies) sched_yield(); /* it is in the driver now */
  fake.set_copy_delay_us(0);
  mtc_plan *first = copy_into(earlier, sizeof earlier, target_info.address, &background, 0);
  uint64_t stream = 0;
  if (with_stream) CHECK_OK(mtc_stream_create(0, &stream));
  mtc_plan *second = copy_into(later, sizeof later, target_info.address, &here, stream);
  /* While the background thread was held, `first` was still queued. */
  CHECK_OK(mtc_plan_wait(second));
  CHECK_OK(mtc_plan_wait(first));
  CHECK_OK(mtc_plan_wait(busy));
  uint8_t back[64];
  download(0, target_info.address, sizeof back, back);
  if (memcmp(back, later, sizeof later) != 0) {
    printf("%s: %s: the earlier copy landed last\n", SUITE, with_stream ? "with a stream" : "on the calling thread");
  }
  CHECK(memcmp(back, later, sizeof later) == 0);
  mtc_plan_release(busy);
  mtc_plan_release(first);
  mtc_plan_release(second);
  if (stream != 0) mtc_stream_destroy(0, stream);
  mtc_block_release(busy_block);
  mtc_block_release(target);
  free(busy_bytes_host);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  void *handle = fake_open(driver);
  if (handle != NULL) {
    FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
    FAKE_SYM(handle, fake.copy_count, "fake_cuda_copy_count");
    FAKE_SYM(handle, fake.set_sync_linger_us, "fake_cuda_set_sync_linger_us");
    FAKE_SYM(handle, fake.synchronizes_in_progress, "fake_cuda_synchronizes_in_progress");
  }
  if (fake.set_copy_delay_us == NULL || fake.copy_count == NULL || fake.set_sync_linger_us == NULL ||
      fake.synchronizes_in_progress == NULL) {
    check_skip(SUITE, "needs the emulated driver's delays");
    return check_summary(SUITE);
  }
  for (size_t i = 0; i < sizeof source; i++) source[i] = (uint8_t)(i * 29);
  mtc_stats before = checked_stats();
  release_waits_for_waiter();
  submission_order(0);
  submission_order(1);
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  return check_summary(SUITE);
}
