/* stats.c — counters: what one plan did (mtc_plan_get_stats) and what the
 * library holds across plans (mtc_get_stats), and trimming the pools. */
#include <string.h>

#include "memory/block.h"
#include "memory/pinned_pool.h"
#include "plan/phase.h"
#include "stage/staging_pool.h"

/* sizeof(mtc_plan_stats) before leaves_direct: callers of then pass it. */
#define PLAN_STATS_SIZE_0_1 96u

MTC_API mtc_status mtc_plan_get_stats(const mtc_plan *plan,
                                      mtc_plan_stats *out) {
  if (plan == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: plan and out must not be NULL");
  }
  if (out->struct_size < PLAN_STATS_SIZE_0_1) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: out->struct_size is %u, needs "
                         "at least %u",
                         out->struct_size, PLAN_STATS_SIZE_0_1);
  }
  /* The lock guards the stats only; the plan itself is not changed. */
  mtc_plan *p = (mtc_plan *)plan;
  mtc_plan_stats all;
  pthread_mutex_lock(&p->lock);
  all = p->stats;
  pthread_mutex_unlock(&p->lock);
  all.leaves = plan->leaf_count;
  /* An older caller's smaller struct gets the fields it knows. */
  size_t size = out->struct_size < sizeof all ? out->struct_size : sizeof all;
  all.struct_size = (uint32_t)size;
  memcpy(out, &all, size);
  return MTC_OK;
}

/* sizeof(mtc_stats) in version 0.1: callers of then pass it. */
#define STATS_SIZE_0_1 80u

MTC_API mtc_status mtc_get_stats(mtc_stats *out) {
  if (out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  }
  if (out->struct_size < STATS_SIZE_0_1) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "out->struct_size is %u, needs at least %u",
                         out->struct_size, STATS_SIZE_0_1);
  }
  mtc_block_counters blocks;
  mtc_block_get_counters(&blocks);
  mtc_pinned_stats pinned;
  mtc_pinned_get_stats(&pinned);
  mtc_stats all;
  memset(&all, 0, sizeof all);
  all.staging_threads = mtc_staging_pool_size();
  all.plans_live = mtc_plan_live_count();
  all.blocks_live = blocks.blocks_live;
  all.device_bytes_live = blocks.device_bytes_live;
  all.host_bytes_live = blocks.host_bytes_live;
  all.pinned_bytes_cached = pinned.bytes_cached;
  all.pinned_bytes_in_use = pinned.bytes_in_use;
  all.pinned_allocations = pinned.allocations;
  all.pinned_reuses = pinned.reuses;
  all.pinned_limit_bytes = pinned.limit;
  all.pinned_staging_bytes = pinned.staging_bytes;
  all.pinned_output_bytes = pinned.output_bytes;
  all.pinned_high_water_bytes = pinned.high_water;
  all.pinned_limit_waits = pinned.limit_waits;
  all.pinned_held_bytes = pinned.held_bytes;
  all.pinned_held_limit_bytes = pinned.held_limit;
  /* An older caller's smaller struct gets the fields it knows. */
  size_t size = out->struct_size < sizeof all ? out->struct_size : sizeof all;
  all.struct_size = (uint32_t)size;
  memcpy(out, &all, size);
  return MTC_OK;
}

MTC_API void mtc_trim_pools(void) { mtc_pinned_trim(); }

MTC_API mtc_status mtc_set_pinned_limit(uint64_t bytes) {
  return mtc_pinned_set_limit(bytes);
}
