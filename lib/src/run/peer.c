/* peer.c — device -> other device, one peer copy per leaf on the target's
 * copy stream (direct where the pair has peer access, else the driver goes
 * through the host). gather.c replaces the per-leaf copies of packed leaves
 * with one kernel launch where it can. */
#include "run/directions.h"

/* Copies count leaves of the source device into block at their offsets
 * (own leaves: offset 0). */
static mtc_status copy_leaves(mtc_transfer *t, mtc_device *source,
                              mtc_device *target, const uint64_t *members,
                              uint64_t count, mtc_block *block) {
  mtc_plan *plan = t->plan;
  t->stats->copies_issued += count;
  for (uint64_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &plan->leaves[members[i]];
    uint64_t offset = mtc_plan_block_offset(plan, members[i]);
    uint64_t begin = mtc_trace_now(t->trace);
    mtc_status status = mtc_cuda_check(
        t->cu->cuMemcpyPeerAsync(block->address + offset, target->context,
                                 leaf->address, source->context,
                                 (size_t)leaf->bytes, target->stream),
        "cuMemcpyPeerAsync");
    if (status != MTC_OK) return status;
    mtc_trace_dma(t->trace, target, "leaf", (int64_t)members[i], leaf->bytes, begin);
  }
  return MTC_OK;
}

/* A block on the target for `bytes` copied from source_ordinal. */
static mtc_status peer_block(mtc_transfer *t, int32_t source_ordinal,
                             uint64_t bytes, mtc_device **source,
                             mtc_device **target, mtc_block **out) {
  mtc_status status = mtc_device_get(source_ordinal, source);
  if (status != MTC_OK) return status;
  status = mtc_transfer_enter_peer_copy(t, *source, target);
  if (status != MTC_OK) return status;
  status = mtc_block_new_device(*target, bytes, out);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(t->plan, *out);
  return MTC_OK;
}

mtc_status mtc_peer_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                          uint64_t count, mtc_block **out) {
  const mtc_chunk *chunk = &t->plan->layout.chunks[c];
  mtc_device *source, *target;
  mtc_status status = peer_block(t, chunk->source_device, chunk->bytes,
                                 &source, &target, out);
  if (status != MTC_OK) return status;
  return copy_leaves(t, source, target, members, count, *out);
}

mtc_status mtc_peer_own_leaf(mtc_transfer *t, uint64_t index, mtc_block **out) {
  const mtc_leaf *leaf = &t->plan->leaves[index];
  mtc_device *source, *target;
  mtc_status status = peer_block(t, leaf->device, leaf->bytes, &source,
                                 &target, out);
  if (status != MTC_OK) return status;
  return copy_leaves(t, source, target, &index, 1, *out);
}
