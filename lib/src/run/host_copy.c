/* host_copy.c — host -> host: leaves the plan copies (strided ones, made
 * dense) go into malloc'd host blocks; a packed chunk's leaves share one. */
#include "run/directions.h"

mtc_status mtc_host_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                          uint64_t count, mtc_block **out) {
  mtc_block *block;
  mtc_status status =
      mtc_block_new_host(t->plan->layout.chunks[c].bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(t->plan, block);
  *out = block;
  return mtc_transfer_stage_chunk(t, members, count,
                                  (unsigned char *)(uintptr_t)block->address);
}

mtc_status mtc_host_own_leaf(mtc_transfer *t, const mtc_leaf *leaf,
                             mtc_block **out) {
  mtc_block *block;
  mtc_status status = mtc_block_new_host(leaf->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(t->plan, block);
  *out = block;
  mtc_stage_segment seg =
      mtc_leaf_segment(t->plan, leaf, (unsigned char *)(uintptr_t)block->address);
  return mtc_transfer_stage(t, &seg, 1);
}
