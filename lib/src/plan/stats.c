/* stats.c — counters: what one plan did (mtc_plan_get_stats) and what the
 * library holds across plans (mtc_get_stats), and trimming the pools. */
#include "memory/block.h"
#include "memory/pinned_pool.h"
#include "plan/phase.h"
#include "stage/staging_pool.h"

MTC_API mtc_status mtc_plan_get_stats(const mtc_plan *plan,
                                      mtc_plan_stats *out) {
  if (plan == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: plan and out must not be NULL");
  }
  if (out->struct_size < sizeof(mtc_plan_stats)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: out->struct_size is %u, needs "
                         "at least %zu",
                         out->struct_size, sizeof(mtc_plan_stats));
  }
  /* The lock guards the stats only; the plan itself is not changed. */
  mtc_plan *p = (mtc_plan *)plan;
  pthread_mutex_lock(&p->lock);
  *out = p->stats;
  pthread_mutex_unlock(&p->lock);
  out->struct_size = sizeof *out;
  out->leaves = plan->leaf_count;
  return MTC_OK;
}

MTC_API mtc_status mtc_get_stats(mtc_stats *out) {
  if (out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  }
  if (out->struct_size < sizeof(mtc_stats)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "out->struct_size is %u, needs at least %zu",
                         out->struct_size, sizeof(mtc_stats));
  }
  mtc_block_counters blocks;
  mtc_block_get_counters(&blocks);
  mtc_pinned_stats pinned;
  mtc_pinned_get_stats(&pinned);
  out->staging_threads = mtc_staging_pool_size();
  out->plans_live = mtc_plan_live_count();
  out->blocks_live = blocks.blocks_live;
  out->device_bytes_live = blocks.device_bytes_live;
  out->host_bytes_live = blocks.host_bytes_live;
  out->pinned_bytes_cached = pinned.bytes_cached;
  out->pinned_bytes_in_use = pinned.bytes_in_use;
  out->pinned_allocations = pinned.allocations;
  out->pinned_reuses = pinned.reuses;
  out->reserved0 = 0;
  return MTC_OK;
}

MTC_API void mtc_trim_pools(void) { mtc_pinned_trim(); }
