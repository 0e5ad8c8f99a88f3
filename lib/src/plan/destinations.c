/* destinations.c — mtc_plan_set_destination_blocks: which destinations of
 * a plan of copies into existing memory lie in device blocks of libmtc's.
 * A kernel on one GPU may write another GPU's memory only where that memory
 * was opened to it: libmtc opens its own pool (cuMemPoolSetAccess), but
 * cannot open another allocator's. So between two GPUs, run/into.c gathers
 * a source device's packed leaves with one kernel only when every one of
 * their destinations was named here; otherwise each takes a peer copy,
 * which reaches any memory. A block named here is checked (a device block
 * of the destination's device that holds all of its bytes), never trusted,
 * and the plan holds it until it is released. */
#include <stdlib.h>
#include <string.h>

#include "plan/phase.h"

static const char call[] = "mtc_plan_set_destination_blocks";

/* Whether `block` is a device block of libmtc's holding all of `dst`'s
 * bytes; else sets the thread's last error about leaf `index`. */
static mtc_status check_block(const mtc_block *block, const mtc_leaf *dst,
                              uint64_t index) {
  unsigned long long i = (unsigned long long)index;
  if (dst->device < 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: leaf %llu: the destination is in host memory; "
                         "only device destinations lie in device blocks",
                         call, i);
  }
  if (block->kind != MTC_BLOCK_DEVICE) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: leaf %llu: the block is host memory, not a "
                         "device block",
                         call, i);
  }
  if (block->device != dst->device) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: leaf %llu: the block is on cuda:%d but the "
                         "destination is on cuda:%d",
                         call, i, block->device, dst->device);
  }
  if (dst->bytes > 0 &&
      (dst->address < block->address ||
       dst->address - block->address > block->bytes ||
       dst->bytes > block->bytes - (dst->address - block->address))) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: leaf %llu: the destination [0x%llx, +%llu) does "
                         "not lie inside the block [0x%llx, +%llu)",
                         call, i, (unsigned long long)dst->address,
                         (unsigned long long)dst->bytes,
                         (unsigned long long)block->address,
                         (unsigned long long)block->bytes);
  }
  return MTC_OK;
}

/* Makes room for `needed` entries (the new ones NULL). */
static mtc_status grow(mtc_plan *plan, uint64_t needed) {
  if (needed <= plan->destination_block_capacity) return MTC_OK;
  mtc_block **more = realloc(plan->destination_blocks,
                             (size_t)needed * sizeof *more);
  if (more == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "%s: out of host memory",
                         call);
  }
  memset(more + plan->destination_block_capacity, 0,
         (size_t)(needed - plan->destination_block_capacity) * sizeof *more);
  plan->destination_blocks = more;
  plan->destination_block_capacity = needed;
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_set_destination_blocks(mtc_plan *plan,
                                                   uint64_t first,
                                                   mtc_block *const *blocks,
                                                   uint64_t count) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_plan_fail(plan,
                         mtc_error_set(MTC_ERR_INVALID_STATE,
                                       "%s: only before submit", call),
                         -1);
  }
  if (plan->into <= 0 && count > 0) {
    return mtc_plan_fail(plan,
                         mtc_error_set(MTC_ERR_INVALID_STATE,
                                       "%s: the plan has no destinations "
                                       "(mtc_plan_add_leaves_into)",
                                       call),
                         -1);
  }
  if (first > plan->leaf_count || count > plan->leaf_count - first) {
    return mtc_plan_fail(plan,
                         mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                       "%s: leaves %llu to %llu, but the plan "
                                       "has %llu",
                                       call, (unsigned long long)first,
                                       (unsigned long long)(first + count),
                                       (unsigned long long)plan->leaf_count),
                         -1);
  }
  if (blocks == NULL && count > 0) {
    return mtc_plan_fail(plan,
                         mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                       "%s: blocks must not be NULL", call),
                         -1);
  }
  /* All or none: every block is checked before any is taken. */
  for (uint64_t k = 0; k < count; k++) {
    if (blocks[k] == NULL) continue;
    mtc_status status = check_block(blocks[k], &plan->destinations[first + k],
                                    first + k);
    if (status != MTC_OK) return mtc_plan_fail(plan, status, (int64_t)(first + k));
  }
  if (count == 0) return MTC_OK;
  mtc_status status = grow(plan, first + count);
  if (status != MTC_OK) return mtc_plan_fail(plan, status, -1);
  for (uint64_t k = 0; k < count; k++) {
    mtc_block **slot = &plan->destination_blocks[first + k];
    mtc_block *block = blocks[k];
    mtc_block_retain(block);
    mtc_block_release(*slot);
    *slot = block;
  }
  return MTC_OK;
}
