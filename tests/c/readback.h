/* readback.h — device memory read back through a plain device -> host plan,
 * so that the checks hold on the emulated driver and on a real GPU alike. */
#ifndef MTC_TEST_READBACK_H
#define MTC_TEST_READBACK_H

#include "check.h"
#include "helpers.h"

/* Copies `bytes` bytes at `address` on `device` into `out`. */
static inline void download(int32_t device, uint64_t address, uint64_t bytes, uint8_t *out) {
  mtc_leaf leaf = make_leaf(address, bytes, 1, device);
  mtc_plan *plan = NULL;
  mtc_leaf_result result;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, &leaf, 1));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, 1, &result));
  memcpy(out, (const void *)(uintptr_t)result.address, (size_t)bytes);
  mtc_plan_release(plan);
}

#endif
