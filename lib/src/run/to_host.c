/* to_host.c — device -> host, one DMA per leaf, into pinned host blocks
 * (the results are views of them): a packed chunk's leaves into one block,
 * an own leaf into a block of its own. gather.c replaces the per-leaf DMAs
 * of packed leaves with one kernel launch where it can. */
#include "run/directions.h"

/* A pinned host block of `bytes` for leaves of source_ordinal, whose copy
 * stream is entered and ordered after the caller's stream there. */
static mtc_status host_block(mtc_transfer *t, int32_t source_ordinal,
                             uint64_t bytes, mtc_device **source,
                             mtc_block **out) {
  mtc_status status = mtc_transfer_enter_device(t, source_ordinal, source);
  if (status != MTC_OK) return status;
  status = mtc_transfer_order_after_source(t, *source, source_ordinal);
  if (status != MTC_OK) return status;
  status = mtc_block_new_pinned(*source, bytes, MTC_PINNED_OUTPUT, out);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(t->plan, *out);
  mtc_transfer_count_pinned(t, &(*out)->pinned);
  mtc_transfer_note_path(t, MTC_PATH_PER_LEAF);
  return MTC_OK;
}

/* Copies count leaves into block at their offsets (own leaves: 0). */
static mtc_status copy_leaves(mtc_transfer *t, mtc_device *source,
                              const uint64_t *members, uint64_t count,
                              mtc_block *block) {
  mtc_plan *plan = t->plan;
  t->stats->copies_issued += count;
  for (uint64_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &plan->leaves[members[i]];
    uint64_t offset = mtc_plan_block_offset(plan, members[i]);
    uint64_t begin = mtc_trace_now(t->trace);
    mtc_status status = mtc_cuda_check(
        t->cu->cuMemcpyDtoHAsync_v2(
            (void *)(uintptr_t)(block->address + offset),
            (CUdeviceptr)leaf->address, (size_t)leaf->bytes, source->stream),
        "cuMemcpyDtoHAsync");
    if (status != MTC_OK) return status;
    mtc_trace_dma(t->trace, source, "leaf", (int64_t)members[i], leaf->bytes, begin);
  }
  return MTC_OK;
}

mtc_status mtc_to_host_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                             uint64_t count, mtc_block **out) {
  const mtc_chunk *chunk = &t->plan->layout.chunks[c];
  mtc_device *source;
  mtc_status status = host_block(t, chunk->source_device, chunk->bytes, &source, out);
  if (status != MTC_OK) return status;
  return copy_leaves(t, source, members, count, *out);
}

mtc_status mtc_to_host_own_leaf(mtc_transfer *t, uint64_t index, mtc_block **out) {
  const mtc_leaf *leaf = &t->plan->leaves[index];
  mtc_device *source;
  mtc_status status = host_block(t, leaf->device, leaf->bytes, &source, out);
  if (status != MTC_OK) return status;
  return copy_leaves(t, source, &index, 1, *out);
}
