/* test_stop_reading.c — mtc_plan_stop_reading against the emulated driver
 * (its path in argv[1]): it waits for a read of host memory in progress (a
 * pageable copy, whose driver call reads the leaf until the modelled copy
 * ends) or gives up at its timeout; the plan's later reads fail, naming the
 * leaf, with nothing leaked; other plans, and plans of device sources, go
 * on copying. */
#include <time.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"

#define SUITE "test_stop_reading"

static struct {
  void (*set_copy_delay_us)(unsigned long long);
  int (*live_device_allocations)(void);
} fake;

static mtc_leaf host_leaf(const void *data, uint64_t bytes) {
  mtc_leaf leaf = {0};
  leaf.address = (uint64_t)(uintptr_t)data;
  leaf.bytes = bytes;
  leaf.device = MTC_DEVICE_CPU;
  leaf.element_size = 4;
  return leaf;
}

/* A plan of `count` leaves to `target`, submitted; NULL if submit failed
 * (then *submitted holds its status). */
static mtc_plan *start(int32_t target, const mtc_leaf *leaves, size_t count,
                       uint32_t background, uint32_t pinned,
                       mtc_status *submitted) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  o.use_pinned_staging = pinned;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  *submitted = mtc_plan_submit(plan);
  return plan;
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  void *handle = fake_open(driver);
  if (handle == NULL) return check_summary(SUITE);
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  FAKE_SYM(handle, fake.live_device_allocations,
           "fake_cuda_live_device_allocations");
  CHECK(fake.set_copy_delay_us != NULL && fake.live_device_allocations != NULL);
  if (fake.set_copy_delay_us == NULL) return check_summary(SUITE);

  enum { BIG = 1 << 20, SMALL = 64 };
  float *big = calloc(BIG / 4, 4);
  float *big2 = calloc(BIG / 4, 4);
  float *small = calloc(SMALL / 4, 4);
  for (int i = 0; i < SMALL / 4; i++) small[i] = (float)i;
  mtc_leaf small_leaf = host_leaf(small, SMALL);
  mtc_status submitted;

  CHECK_STATUS(mtc_plan_stop_reading(NULL, 0), MTC_ERR_INVALID_ARGUMENT);

  /* A device copy to use as a source later. */
  mtc_plan *on_gpu = start(0, &small_leaf, 1, 0, 1, &submitted);
  CHECK_OK(submitted);
  CHECK_OK(mtc_plan_wait(on_gpu));
  mtc_leaf_result result;
  CHECK_OK(mtc_plan_results(on_gpu, 0, 1, &result));
  mtc_leaf device_leaf = small_leaf;
  device_leaf.address = result.address;
  device_leaf.device = 0;
  mtc_stats before = checked_stats();
  int allocations_before = fake.live_device_allocations();

  /* Two pageable leaves on the background thread: the driver call of the
   * first reads `big` for the 300 ms its modelled copy takes. Stopping then
   * times out, then waits for that read; the second leaf is never read. */
  fake.set_copy_delay_us(300 * 1000);
  mtc_leaf bigs[2] = {host_leaf(big, BIG), host_leaf(big2, BIG)};
  mtc_plan *reading = start(0, bigs, 2, 1, 0, &submitted);
  CHECK_OK(submitted);
  sleep_ms(50); /* the background thread is inside the first call now */
  double t0 = now_ms();
  CHECK_STATUS(mtc_plan_stop_reading(reading, 20), MTC_IN_PROGRESS);
  CHECK_CONTAINS(mtc_last_error(), "still in progress after 20 ms");
  CHECK(now_ms() - t0 >= 15);
  CHECK_OK(mtc_plan_stop_reading(reading, 5000));
  CHECK(now_ms() - t0 >= 150);
  fake.set_copy_delay_us(0);
  CHECK_STATUS(mtc_plan_wait(reading), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(reading), "stopped reading host memory");
  CHECK(mtc_plan_error_leaf(reading) == 1);
  mtc_plan_release(reading);

  /* Stopped before submit: foreground and background submissions fail at
   * their first read, naming the leaf (a packed chunk: its first leaf). */
  mtc_leaf two[2] = {small_leaf, small_leaf};
  for (uint32_t background = 0; background < 2; background++) {
    mtc_options o = MTC_OPTIONS_INIT;
    o.use_background_thread = background;
    mtc_plan *plan = NULL;
    CHECK_OK(mtc_plan_create(1, &o, &plan));
    CHECK_OK(mtc_plan_add_leaves(plan, two, 2));
    CHECK_OK(mtc_plan_stop_reading(plan, 0));
    mtc_status s = mtc_plan_submit(plan);
    CHECK_STATUS(s, background ? MTC_OK : MTC_ERR_INVALID_STATE);
    CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_INVALID_STATE);
    CHECK_CONTAINS(mtc_plan_last_error(plan), "mtc_plan_stop_reading");
    CHECK(mtc_plan_error_leaf(plan) == 0);
    mtc_plan_release(plan);
  }

  /* Other plans are not affected; a plan of device sources reads no host
   * memory, so stopping its reads changes nothing. */
  mtc_plan *plan = start(1, &small_leaf, 1, 1, 1, &submitted);
  CHECK_OK(submitted);
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);
  for (int32_t target = 1; target >= MTC_DEVICE_CPU; target -= 2) {
    mtc_options o = MTC_OPTIONS_INIT;
    plan = NULL;
    CHECK_OK(mtc_plan_create(target, &o, &plan));
    CHECK_OK(mtc_plan_add_leaves(plan, &device_leaf, 1));
    CHECK_OK(mtc_plan_stop_reading(plan, 0));
    CHECK_OK(mtc_plan_submit(plan));
    CHECK_OK(mtc_plan_wait(plan));
    CHECK_OK(mtc_plan_results(plan, 0, 1, &result));
    if (target == MTC_DEVICE_CPU) {
      CHECK(memcmp((const void *)(uintptr_t)result.address, small, SMALL) == 0);
    }
    mtc_plan_release(plan);
  }

  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  CHECK_EQ_U64(after.device_bytes_live, before.device_bytes_live);
  CHECK_EQ_U64(after.pinned_bytes_in_use, before.pinned_bytes_in_use);
  CHECK(fake.live_device_allocations() == allocations_before);
  mtc_plan_release(on_gpu);
  free(big);
  free(big2);
  free(small);
  return check_summary(SUITE);
}
