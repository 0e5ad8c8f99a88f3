/* copy_out.c — copying an into plan's bytes into its host destinations
 * (see copy_out.h). */
#include "run/copy_out.h"

#include <stdlib.h>

/* The entry of plan->pinned whose block holds `address`, or -1. */
static int64_t pinned_entry(const mtc_plan *plan, uint64_t address) {
  for (size_t k = 0; k < plan->pinned_count; k++) {
    if (mtc_block_holds(plan->pinned[k], address, 1)) return (int64_t)k;
  }
  return -1;
}

void mtc_plan_mark_copy_out_blocks(mtc_plan *plan) {
  if (plan->pinned_count == 0) return;
  for (size_t k = 0; k < plan->copy_out_count; k++) {
    uint64_t i = plan->copy_out_leaves[k];
    const mtc_leaf *leaf = &plan->leaves[i];
    int64_t from = leaf->device == MTC_DEVICE_CPU ? pinned_entry(plan, leaf->address) : -1;
    int64_t to = pinned_entry(plan, plan->destinations[i].address);
    if (from >= 0) plan->pinned_how[from] |= MTC_PINNED_COPY_OUT;
    if (to >= 0) plan->pinned_how[to] |= MTC_PINNED_COPY_OUT;
  }
}

static mtc_status copy_out(mtc_plan *plan) {
  if (plan->copy_out_count == 0) return MTC_OK;
  /* Leaves a later copy supersedes are dropped from the list first. */
  size_t n = plan->copy_out_count;
  if (plan->copy_out_skip != NULL) {
    size_t kept = 0;
    for (size_t k = 0; k < plan->copy_out_count; k++) {
      if (plan->copy_out_skip[plan->copy_out_leaves[k]]) continue;
      plan->copy_out[kept] = plan->copy_out[k];
      plan->copy_out_leaves[kept++] = plan->copy_out_leaves[k];
    }
    n = kept;
  }
  plan->copy_out_count = 0;
  if (n == 0) return MTC_OK;
  /* The destinations (and host sources) are the caller's memory: the guard
   * keeps the copy from running once the runtime has begun to free it. */
  mtc_status status = mtc_plan_read_begin(plan);
  if (status != MTC_OK) return status;
  mtc_stage_copy(plan->copy_out, n, plan->options.staging_threads);
  mtc_plan_read_end(plan);
  return MTC_OK;
}

mtc_status mtc_plan_copy_out(mtc_plan *plan) {
  mtc_status status = copy_out(plan);
  /* Done, or never to be done: the pinned blocks it used are free. */
  mtc_plan_end_copy_outs(plan);
  return status;
}

mtc_status mtc_plan_mark_copy_out_skipped(mtc_plan *plan, uint64_t leaf) {
  if (plan->copy_out_skip == NULL) {
    plan->copy_out_skip = calloc((size_t)plan->leaf_count, 1);
    if (plan->copy_out_skip == NULL) {
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
    }
  }
  plan->copy_out_skip[leaf] = 1;
  return MTC_OK;
}
