/* to_device.c — host -> device. A packed chunk: stage all its leaves into
 * one buffer (pinned, or malloc'd with usePinnedStaging off), one H2D copy.
 * An own (large) leaf: stream it through pinned pieces, so that staging
 * piece k+1 overlaps the DMA of piece k; with pinned staging off, hand the
 * pageable memory to the driver (densified first when strided). */
#include <stdlib.h>

#include "run/directions.h"
#include "run/staging.h"

/* A direct chunk: a run of the library's pinned memory (which the plan
 * holds), DMA'd from where it lies into one block. */
static mtc_status direct_chunk(mtc_transfer *t, size_t c, mtc_device *target,
                               mtc_block **out) {
  const mtc_chunk *chunk = &t->plan->layout.chunks[c];
  mtc_status status = mtc_transfer_order_after_pinned(t, target);
  if (status != MTC_OK) return status;
  uint64_t begin = mtc_trace_now(t->trace);
  mtc_block *block;
  status = mtc_block_new_device(target, chunk->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(t->plan, block);
  *out = block;
  mtc_trace_span(t->trace, "alloc", "block", (int64_t)c, chunk->bytes, begin);
  t->stats->copies_issued++;
  begin = mtc_trace_now(t->trace);
  status = mtc_cuda_check(
      t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                  (const void *)(uintptr_t)chunk->direct_address,
                                  (size_t)chunk->bytes, target->stream),
      "cuMemcpyHtoDAsync");
  if (status == MTC_OK) {
    mtc_trace_dma(t->trace, target, "direct", (int64_t)c, chunk->bytes, begin);
  }
  return status;
}

mtc_status mtc_to_device_chunk(mtc_transfer *t, size_t c,
                               const uint64_t *members, uint64_t count,
                               mtc_block **out) {
  mtc_plan *plan = t->plan;
  const mtc_chunk *chunk = &plan->layout.chunks[c];
  mtc_device *target;
  mtc_status status = mtc_transfer_enter_device(t, plan->target, &target);
  if (status != MTC_OK) return status;
  if (chunk->direct_address != 0) return direct_chunk(t, c, target, out);
  unsigned char *staged;
  uint64_t begin = mtc_trace_now(t->trace);
  if (plan->options.use_pinned_staging) {
    mtc_pinned_buffer buffer;
    status = mtc_transfer_acquire_staging(t, target, (size_t)chunk->bytes, &buffer);
    if (status != MTC_OK) return status;
    staged = buffer.ptr;
  } else {
    staged = malloc((size_t)chunk->bytes);
    if (staged == NULL) return mtc_out_of_host_memory();
    mtc_plan_keep_host(plan, staged);
  }
  mtc_trace_span(t->trace, "alloc", "chunk", (int64_t)c, chunk->bytes, begin);
  begin = mtc_trace_now(t->trace);
  status = mtc_transfer_stage_chunk(t, members, count, staged);
  if (status != MTC_OK) return status;
  mtc_trace_span(t->trace, "stage", "chunk", (int64_t)c, chunk->bytes, begin);
  begin = mtc_trace_now(t->trace);
  mtc_block *block;
  status = mtc_block_new_device(target, chunk->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(plan, block);
  *out = block;
  mtc_trace_span(t->trace, "alloc", "block", (int64_t)c, chunk->bytes, begin);
  t->stats->copies_issued++;
  begin = mtc_trace_now(t->trace);
  status = mtc_cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                                      staged, (size_t)chunk->bytes,
                                                      target->stream),
                          "cuMemcpyHtoDAsync");
  if (status == MTC_OK) {
    mtc_trace_dma(t->trace, target, "chunk", (int64_t)c, chunk->bytes, begin);
  }
  return status;
}

/* Room for a piece of `length` (<= piece_bytes) bytes in the current piece
 * buffer. A full buffer is closed with an event after its DMAs, and the next
 * one is reused only once its own event says its DMAs are done: staging
 * into one buffer overlaps the DMA out of the others. */
static mtc_status piece_space(mtc_transfer *t, mtc_device *target, size_t length,
                              unsigned char **out) {
  mtc_piece_slot *slot = &t->pieces[t->slot];
  size_t offset = (t->slot_fill + MTC_PIECE_ALIGNMENT - 1) / MTC_PIECE_ALIGNMENT *
                  MTC_PIECE_ALIGNMENT;
  mtc_status status;
  if (!t->slot_ready || offset + length > t->piece_bytes) {
    if (t->slot_ready) {
      status = mtc_cuda_check(t->cu->cuEventRecord(slot->event, target->stream),
                          "cuEventRecord");
      if (status != MTC_OK) return status;
      slot->recorded = 1;
      t->slot = (t->slot + 1) % MTC_PIECE_RING;
      slot = &t->pieces[t->slot];
    }
    uint64_t begin = mtc_trace_now(t->trace);
    if (slot->buffer.ptr == NULL) {
      /* At the pinned pool's limit this may wait for the DMAs of the other
       * piece buffers and give them back too (they are taken again later). */
      status = mtc_transfer_acquire_staging(t, target, t->piece_bytes, &slot->buffer);
      if (status != MTC_OK) return status;
      if (slot->event == NULL) {
        status = mtc_device_event_acquire(target, &slot->event);
        if (status != MTC_OK) return status;
        status = mtc_transfer_hold_event(t, target, slot->event);
        if (status != MTC_OK) {
          slot->event = NULL;
          return status;
        }
      }
      mtc_trace_span(t->trace, "alloc", "ring", (int64_t)t->slot, t->piece_bytes, begin);
    } else if (slot->recorded) {
      status = mtc_cuda_check(t->cu->cuEventSynchronize(slot->event),
                              "cuEventSynchronize");
      if (status != MTC_OK) return status;
      mtc_trace_span(t->trace, "wait", "ring", (int64_t)t->slot, t->piece_bytes, begin);
    }
    t->slot_ready = 1;
    offset = 0;
  }
  t->slot_fill = offset + length;
  *out = (unsigned char *)slot->buffer.ptr + offset;
  return MTC_OK;
}

static mtc_status stream_own_leaf(mtc_transfer *t, mtc_device *target,
                                  const mtc_leaf *leaf, CUdeviceptr dst) {
  int64_t index = leaf - t->plan->leaves;
  for (uint64_t done = 0; done < leaf->bytes;) {
    uint64_t length = leaf->bytes - done;
    if (length > t->piece_bytes) length = t->piece_bytes;
    unsigned char *piece;
    mtc_status status = piece_space(t, target, (size_t)length, &piece);
    if (status != MTC_OK) return status;
    mtc_stage_segment seg = mtc_leaf_segment(t->plan, leaf, piece);
    seg.begin = done;
    seg.end = done + length;
    uint64_t begin = mtc_trace_now(t->trace);
    status = mtc_transfer_stage(t, &seg, 1);
    if (status != MTC_OK) return status;
    mtc_trace_span(t->trace, "stage", "leaf", index, length, begin);
    t->stats->copies_issued++;
    begin = mtc_trace_now(t->trace);
    status = mtc_cuda_check(t->cu->cuMemcpyHtoDAsync_v2(dst + done, piece,
                                                        (size_t)length,
                                                        target->stream),
                            "cuMemcpyHtoDAsync");
    if (status != MTC_OK) return status;
    mtc_trace_dma(t->trace, target, "leaf", index, length, begin);
    done += length;
  }
  return MTC_OK;
}

mtc_status mtc_to_device_own_leaf(mtc_transfer *t, const mtc_leaf *leaf,
                                  mtc_block **out) {
  mtc_plan *plan = t->plan;
  mtc_device *target;
  mtc_status status = mtc_transfer_enter_device(t, plan->target, &target);
  if (status != MTC_OK) return status;
  mtc_block *block;
  uint64_t begin = mtc_trace_now(t->trace);
  status = mtc_block_new_device(target, leaf->bytes, &block);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(plan, block);
  *out = block;
  mtc_trace_span(t->trace, "alloc", "block", leaf - plan->leaves, leaf->bytes, begin);
  return mtc_to_device_leaf_at(t, target, leaf, (CUdeviceptr)block->address);
}

mtc_status mtc_to_device_leaf_at(mtc_transfer *t, mtc_device *target,
                                 const mtc_leaf *leaf, CUdeviceptr dst) {
  mtc_plan *plan = t->plan;
  if (plan->options.use_pinned_staging) {
    return stream_own_leaf(t, target, leaf, dst);
  }
  const void *src = (const void *)(uintptr_t)leaf->address;
  mtc_status status;
  if (leaf->row_count > 1 || mtc_plan_leaf_strided(plan, (uint64_t)(leaf - plan->leaves))) {
    /* The driver copies one contiguous range: densify first. */
    unsigned char *dense = malloc((size_t)leaf->bytes);
    if (dense == NULL) return mtc_out_of_host_memory();
    mtc_plan_keep_host(plan, dense);
    mtc_stage_segment seg = mtc_leaf_segment(plan, leaf, dense);
    status = mtc_transfer_stage(t, &seg, 1);
    if (status != MTC_OK) return status;
    src = dense;
  }
  t->stats->copies_issued++;
  /* The driver reads pageable memory before the call returns. */
  status = mtc_plan_read_begin(plan);
  if (status != MTC_OK) return status;
  status = mtc_cuda_check(t->cu->cuMemcpyHtoDAsync_v2(dst, src, (size_t)leaf->bytes,
                                                      target->stream),
                          "cuMemcpyHtoDAsync");
  mtc_plan_read_end(plan);
  return status;
}
