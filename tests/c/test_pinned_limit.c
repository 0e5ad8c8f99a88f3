/* test_pinned_limit.c — the pinned pool's limit (mtc_set_pinned_limit)
 * against the emulated driver (its path in argv[1]): with a 1 MiB limit,
 * thousands of plans submitted and never polled, a leaf five times the
 * limit, packed chunks that together need more than it, and a gather of
 * 30,000 small leaves back to the host all complete byte for byte, while the
 * staging the pool holds (lent + idle) never exceeds the limit; pinned host
 * outputs are counted apart and not limited. */
#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"

#define SUITE "test_pinned_limit"
#define LIMIT ((uint64_t)1 << 20)

static mtc_plan *submit(int32_t target, const mtc_leaf *leaves, uint64_t count, uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  CHECK_OK(mtc_plan_submit(plan));
  return plan;
}

/* Copies `count` device leaves (from results) back to the host in one plan
 * and compares each with its source. */
static void check_back(const mtc_leaf_result *results, const mtc_leaf *sources, uint64_t count) {
  mtc_leaf *leaves = calloc(count, sizeof *leaves);
  for (uint64_t i = 0; i < count; i++) {
    leaves[i] = sources[i];
    leaves[i].address = results[i].address;
    leaves[i].device = results[i].device;
  }
  mtc_plan *plan = submit(MTC_DEVICE_CPU, leaves, count, 1);
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result *back = calloc(count, sizeof *back);
  CHECK_OK(mtc_plan_results(plan, 0, count, back));
  uint64_t bad = 0;
  for (uint64_t i = 0; i < count; i++) {
    if (memcmp((const void *)(uintptr_t)back[i].address,
               (const void *)(uintptr_t)sources[i].address, sources[i].bytes) != 0) {
      bad++;
    }
  }
  CHECK_EQ_U64(bad, 0);
  mtc_plan_release(plan);
  free(back);
  free(leaves);
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  void *handle = fake_open(getenv("MTC_CUDA_DRIVER"));
  void (*set_delay)(unsigned long long) = NULL;
  if (handle != NULL) FAKE_SYM(handle, set_delay, "fake_cuda_set_copy_delay_us");
  CHECK(set_delay != NULL);
  if (set_delay == NULL) return check_summary(SUITE);

  CHECK_STATUS(mtc_set_pinned_limit(LIMIT - 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "limit must be");
  CHECK_STATUS(mtc_set_pinned_limit(((uint64_t)1 << 50) + 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK(checked_stats().pinned_limit_bytes >= LIMIT);
  /* A caller of version 0.1 passes 80 bytes and gets those. */
  mtc_stats old;
  memset(&old, 0xAB, sizeof old);
  old.struct_size = 80;
  CHECK_OK(mtc_get_stats(&old));
  CHECK(old.struct_size == 80 && old.pinned_staging_bytes == 0xABABABABABABABABull);
  old.struct_size = 79;
  CHECK_STATUS(mtc_get_stats(&old), MTC_ERR_INVALID_ARGUMENT);

  CHECK_OK(mtc_set_pinned_limit(LIMIT));
  mtc_stats before = checked_stats();
  CHECK_EQ_U64(before.pinned_limit_bytes, LIMIT);
  set_delay(20);

  /* 3,000 plans of three small leaves each (a 64 KiB staging chunk each:
   * 190 MiB of staging without the limit), submitted and never polled. */
  enum { PLANS = 3000, PER = 3 };
  mtc_leaf *sources = calloc(PLANS * PER, sizeof *sources);
  uint8_t *bytes = random_bytes(PLANS * PER * 256);
  mtc_plan **plans = calloc(PLANS, sizeof *plans);
  for (int p = 0; p < PLANS; p++) {
    for (int k = 0; k < PER; k++) {
      size_t at = (size_t)(p * PER + k) * 256;
      sources[p * PER + k] = make_leaf(host_address(bytes + at), 16 + (uint64_t)((p + k) % 15) * 16, 4, MTC_DEVICE_CPU);
    }
    plans[p] = submit(p % 2, &sources[p * PER], PER, 1);
  }
  /* A leaf five times the limit, and 40 leaves of 200 KiB (packed chunks
   * cut to a quarter of the limit), in the foreground and the background. */
  uint8_t *big = random_bytes(5 << 20);
  mtc_leaf big_leaf = make_leaf(host_address(big), 5 << 20, 1, MTC_DEVICE_CPU);
  uint8_t *medium = random_bytes(40 * (200 << 10));
  mtc_leaf mediums[40];
  for (int i = 0; i < 40; i++) {
    mediums[i] = make_leaf(host_address(medium + (size_t)i * (200 << 10)), 200 << 10, 8, MTC_DEVICE_CPU);
  }
  mtc_plan *big_plans[4] = {submit(0, &big_leaf, 1, 0), submit(1, &big_leaf, 1, 1),
                            submit(0, mediums, 40, 0), submit(1, mediums, 40, 1)};
  for (int i = 0; i < 4; i++) CHECK_OK(mtc_plan_wait(big_plans[i]));
  mtc_leaf_result big_results[2], medium_results[40];
  CHECK_OK(mtc_plan_results(big_plans[1], 0, 1, big_results));
  CHECK_OK(mtc_plan_results(big_plans[0], 0, 1, big_results + 1));
  check_back(big_results, (mtc_leaf[]){big_leaf, big_leaf}, 2);
  CHECK_OK(mtc_plan_results(big_plans[3], 0, 40, medium_results));
  check_back(medium_results, mediums, 40);

  /* Now every small plan, and the gather of their 9,000 leaves, each of
   * them read up to four times (30,000 segments: three tables), back to the
   * host. */
  mtc_leaf_result *results = calloc(30000, sizeof *results);
  mtc_leaf *expected = calloc(30000, sizeof *expected);
  for (int p = 0; p < PLANS; p++) {
    CHECK_OK(mtc_plan_wait(plans[p]));
    CHECK_OK(mtc_plan_results(plans[p], 0, PER, &results[p * PER]));
  }
  for (int i = 0; i < 30000; i++) {
    results[i] = results[i % (PLANS * PER)];
    expected[i] = sources[i % (PLANS * PER)];
  }
  check_back(results, expected, 30000);

  mtc_stats during = checked_stats();
  CHECK(during.pinned_high_water_bytes <= LIMIT);
  CHECK(during.pinned_limit_waits > before.pinned_limit_waits);
  printf(SUITE ": high water %llu of %llu bytes, %llu waits at the limit\n",
         (unsigned long long)during.pinned_high_water_bytes, (unsigned long long)LIMIT,
         (unsigned long long)(during.pinned_limit_waits - before.pinned_limit_waits));

  /* Pinned outputs past the limit: counted apart, staging still goes on. */
  mtc_leaf on_device = make_leaf(big_results[0].address, 5 << 20, 1, big_results[0].device);
  mtc_plan *to_host = submit(MTC_DEVICE_CPU, &on_device, 1, 1);
  CHECK_OK(mtc_plan_wait(to_host));
  CHECK(checked_stats().pinned_output_bytes >= (5u << 20));
  mtc_plan *after_outputs = submit(0, mediums, 40, 1);
  CHECK_OK(mtc_plan_wait(after_outputs));
  mtc_plan_release(after_outputs);
  mtc_plan_release(to_host);

  for (int p = 0; p < PLANS; p++) mtc_plan_release(plans[p]);
  for (int i = 0; i < 4; i++) mtc_plan_release(big_plans[i]);
  mtc_stats after = checked_stats();
  CHECK(after.pinned_high_water_bytes <= LIMIT);
  CHECK_EQ_U64(after.pinned_staging_bytes, 0);
  CHECK_EQ_U64(after.pinned_output_bytes, 0);
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  set_delay(0);
  free(results);
  free(expected);
  free(plans);
  free(sources);
  free(bytes);
  free(big);
  free(medium);
  return check_summary(SUITE);
}
