/* to_host.c — device -> host, one DMA per leaf, into pinned host blocks
 * (the results are views of them): a packed chunk's leaves into one block,
 * an own leaf into a block of its own. gather.c replaces the per-leaf DMAs
 * of packed leaves with one kernel launch where it can. */
#include "run/directions.h"

mtc_status mtc_to_host_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                             uint64_t count, mtc_block **out) {
  mtc_plan *plan = t->plan;
  const mtc_chunk *chunk = &plan->layout.chunks[c];
  mtc_device *source;
  mtc_status status = mtc_transfer_enter_device(t, chunk->source_device, &source);
  if (status != MTC_OK) return status;
  status = mtc_transfer_order_after_source(t, source, chunk->source_device);
  if (status != MTC_OK) return status;
  mtc_block *block;
  status = mtc_block_new_pinned(source, chunk->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(plan, block);
  mtc_transfer_count_pinned(t, &block->pinned);
  *out = block;
  mtc_transfer_note_path(t, MTC_PATH_PER_LEAF);
  t->stats->copies_issued += count;
  for (uint64_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &plan->leaves[members[i]];
    uint64_t offset = plan->layout.placements[members[i]].offset;
    status = mtc_cuda_check(
        t->cu->cuMemcpyDtoHAsync_v2(
            (void *)(uintptr_t)(block->address + offset),
            (CUdeviceptr)leaf->address, (size_t)leaf->bytes, source->stream),
        "cuMemcpyDtoHAsync");
    if (status != MTC_OK) return status;
  }
  return MTC_OK;
}

mtc_status mtc_to_host_own_leaf(mtc_transfer *t, const mtc_leaf *leaf,
                                mtc_block **out) {
  mtc_plan *plan = t->plan;
  mtc_device *source;
  mtc_status status = mtc_transfer_enter_device(t, leaf->device, &source);
  if (status != MTC_OK) return status;
  status = mtc_transfer_order_after_source(t, source, leaf->device);
  if (status != MTC_OK) return status;
  mtc_block *block;
  status = mtc_block_new_pinned(source, leaf->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(plan, block);
  mtc_transfer_count_pinned(t, &block->pinned);
  *out = block;
  mtc_transfer_note_path(t, MTC_PATH_PER_LEAF);
  t->stats->copies_issued++;
  return mtc_cuda_check(t->cu->cuMemcpyDtoHAsync_v2(
                            (void *)(uintptr_t)block->address,
                            (CUdeviceptr)leaf->address, (size_t)leaf->bytes,
                            source->stream),
                        "cuMemcpyDtoHAsync");
}
