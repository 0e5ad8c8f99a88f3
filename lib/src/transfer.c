/* transfer.c — the copies of one plan, by direction:
 *
 *   host -> device  packed chunk: stage all its leaves into one buffer, one
 *                   H2D copy. Own leaf: stream through pinned pieces, so
 *                   staging piece k+1 overlaps the DMA of piece k.
 *   device -> host  pinned host block per chunk / own leaf, one D2H copy
 *                   per leaf on the source device's stream.
 *   device -> device  block on the target, one peer copy per leaf on the
 *                   target's stream.
 *   host -> host    dense copies of strided leaves into malloc'd blocks.
 */
#include "transfer.h"

#include <stdlib.h>
#include <string.h>

#include "stage_copy.h"

typedef struct piece_slot {
  mtc_pinned_buffer buffer;
  CUevent event;
  int recorded; /* event follows every DMA that read this buffer */
} piece_slot;

/* Pieces in one piece buffer start at multiples of this. */
#define PIECE_ALIGNMENT 256

typedef struct transfer {
  mtc_plan *plan;
  const mtc_cuda_api *cu; /* NULL until a device is involved */
  mtc_context_scope scope;
  /* Devices whose copy stream got work: each gets a completion event. */
  mtc_device **used;
  size_t used_count, used_capacity;
  /* Pinned buffers that own host->device leaves are streamed through, in
   * pieces of at most piece_bytes. Small leaves share a buffer (one piece
   * each); a buffer is refilled only after the DMAs that read it. */
  piece_slot pieces[MTC_PIECE_RING];
  size_t piece_bytes;
  size_t slot;      /* the buffer being filled */
  size_t slot_fill; /* bytes of it handed out */
  int slot_ready;   /* pieces[slot] may take pieces */
} transfer;

static mtc_status out_of_memory(void) {
  return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
}

/* Makes ordinal's context current and notes that its stream gets work. */
static mtc_status enter_device(transfer *t, int32_t ordinal, mtc_device **out) {
  mtc_device *device;
  mtc_status status = mtc_device_get(ordinal, &device);
  if (status != MTC_OK) return status;
  if (t->cu == NULL) {
    status = mtc_cuda_load(&t->cu);
    if (status != MTC_OK) return status;
  }
  status = mtc_context_scope_use(&t->scope, device);
  if (status != MTC_OK) return status;
  size_t i = 0;
  while (i < t->used_count && t->used[i] != device) i++;
  if (i == t->used_count) {
    if (t->used_count == t->used_capacity) {
      size_t grown = t->used_capacity ? t->used_capacity * 2 : 4;
      mtc_device **more = realloc(t->used, grown * sizeof *more);
      if (more == NULL) return out_of_memory();
      t->used = more;
      t->used_capacity = grown;
    }
    t->used[t->used_count++] = device;
  }
  *out = device;
  return MTC_OK;
}

static void keep_block(mtc_plan *plan, mtc_block *block) {
  plan->blocks[plan->block_count++] = block;
}

static void keep_pinned(mtc_plan *plan, const mtc_pinned_buffer *buffer) {
  mtc_plan_staging *s = &plan->staging[plan->staging_count++];
  s->pinned = *buffer;
  s->host = NULL;
}

static void keep_host(mtc_plan *plan, void *host) {
  mtc_plan_staging *s = &plan->staging[plan->staging_count++];
  memset(&s->pinned, 0, sizeof s->pinned);
  s->host = host;
}

static mtc_stage_segment leaf_segment(const mtc_leaf *leaf,
                                      unsigned char *dst) {
  mtc_stage_segment seg;
  seg.dst = dst;
  seg.src = (const unsigned char *)(uintptr_t)leaf->address;
  seg.begin = 0;
  seg.end = leaf->bytes;
  seg.row_bytes = leaf->row_count > 1 ? leaf->bytes / leaf->row_count : 0;
  seg.row_pitch = leaf->row_count > 1 ? leaf->row_pitch : 0;
  return seg;
}

static mtc_status cuda_check(CUresult r, const char *what) {
  return r == CUDA_SUCCESS ? MTC_OK : mtc_cuda_fail(r, what);
}

/* ------------------------------------------------------------ packed chunks */

/* Leaf indices of each chunk, in leaf order: members[first[c] ...]. */
typedef struct chunk_members {
  uint64_t *first; /* chunk_count + 1 entries */
  uint64_t *leaves;
} chunk_members;

static mtc_status group_chunk_members(const mtc_plan *plan,
                                      chunk_members *out) {
  const mtc_layout *layout = &plan->layout;
  out->first = calloc(layout->chunk_count + 1, sizeof *out->first);
  out->leaves = malloc((plan->leaf_count ? plan->leaf_count : 1) *
                       sizeof *out->leaves);
  if (out->first == NULL || out->leaves == NULL) return out_of_memory();
  for (size_t c = 0; c < layout->chunk_count; c++) {
    out->first[c + 1] = out->first[c] + layout->chunks[c].leaf_count;
  }
  uint64_t *fill = calloc(layout->chunk_count + 1, sizeof *fill);
  if (fill == NULL) return out_of_memory();
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    const mtc_placement *place = &layout->placements[i];
    if (place->kind != MTC_PLACE_PACKED) continue;
    out->leaves[out->first[place->chunk] + fill[place->chunk]++] = i;
  }
  free(fill);
  return MTC_OK;
}

/* Copies the chunk's host leaves into dst at their offsets. */
static mtc_status stage_chunk(transfer *t, const uint64_t *members,
                              uint64_t count, unsigned char *dst) {
  mtc_plan *plan = t->plan;
  mtc_stage_segment *segments = malloc(count * sizeof *segments);
  if (segments == NULL) return out_of_memory();
  for (uint64_t i = 0; i < count; i++) {
    uint64_t leaf = members[i];
    segments[i] = leaf_segment(&plan->leaves[leaf],
                               dst + plan->layout.placements[leaf].offset);
  }
  mtc_stage_copy(segments, count, plan->options.staging_threads);
  free(segments);
  return MTC_OK;
}

static mtc_status copy_chunk(transfer *t, size_t c, const uint64_t *members,
                             uint64_t count, mtc_block **out) {
  mtc_plan *plan = t->plan;
  const mtc_chunk *chunk = &plan->layout.chunks[c];
  mtc_block *block = NULL;
  mtc_status status;

  if (chunk->source_device == MTC_DEVICE_CPU && plan->target == MTC_DEVICE_CPU) {
    status = mtc_block_new_host(chunk->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    return stage_chunk(t, members, count,
                       (unsigned char *)(uintptr_t)block->address);
  }

  if (chunk->source_device == MTC_DEVICE_CPU) {
    mtc_device *target;
    status = enter_device(t, plan->target, &target);
    if (status != MTC_OK) return status;
    unsigned char *stage;
    if (plan->options.use_pinned_staging) {
      mtc_pinned_buffer buffer;
      status = mtc_pinned_acquire(target, (size_t)chunk->bytes, &buffer);
      if (status != MTC_OK) return status;
      keep_pinned(plan, &buffer);
      stage = buffer.ptr;
    } else {
      stage = malloc((size_t)chunk->bytes);
      if (stage == NULL) return out_of_memory();
      keep_host(plan, stage);
    }
    status = stage_chunk(t, members, count, stage);
    if (status != MTC_OK) return status;
    status = mtc_block_new_device(target, chunk->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    return cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                                  stage, (size_t)chunk->bytes,
                                                  target->stream),
                      "cuMemcpyHtoDAsync");
  }

  if (plan->target == MTC_DEVICE_CPU) {
    mtc_device *source;
    status = enter_device(t, chunk->source_device, &source);
    if (status != MTC_OK) return status;
    status = mtc_block_new_pinned(source, chunk->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    for (uint64_t i = 0; i < count; i++) {
      const mtc_leaf *leaf = &plan->leaves[members[i]];
      uint64_t offset = plan->layout.placements[members[i]].offset;
      status = cuda_check(
          t->cu->cuMemcpyDtoHAsync_v2(
              (void *)(uintptr_t)(block->address + offset),
              (CUdeviceptr)leaf->address, (size_t)leaf->bytes, source->stream),
          "cuMemcpyDtoHAsync");
      if (status != MTC_OK) return status;
    }
    return MTC_OK;
  }

  mtc_device *source, *target;
  status = mtc_device_get(chunk->source_device, &source);
  if (status != MTC_OK) return status;
  status = enter_device(t, plan->target, &target);
  if (status != MTC_OK) return status;
  status = mtc_block_new_device(target, chunk->bytes, &block);
  if (status != MTC_OK) return status;
  keep_block(plan, block);
    *out = block;
  for (uint64_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &plan->leaves[members[i]];
    uint64_t offset = plan->layout.placements[members[i]].offset;
    status = cuda_check(
        t->cu->cuMemcpyPeerAsync(block->address + offset, target->context,
                                 leaf->address, source->context,
                                 (size_t)leaf->bytes, target->stream),
        "cuMemcpyPeerAsync");
    if (status != MTC_OK) return status;
  }
  return MTC_OK;
}

/* --------------------------------------------------------------- own leaves */

/* Room for a piece of `length` (<= piece_bytes) bytes in the current piece
 * buffer. A full buffer is closed with an event after its DMAs, and the next
 * one is reused only once its own event says its DMAs are done: staging
 * into one buffer overlaps the DMA out of the others. */
static mtc_status piece_space(transfer *t, mtc_device *target, size_t length,
                              unsigned char **out) {
  mtc_plan *plan = t->plan;
  piece_slot *slot = &t->pieces[t->slot];
  size_t offset = (t->slot_fill + PIECE_ALIGNMENT - 1) / PIECE_ALIGNMENT *
                  PIECE_ALIGNMENT;
  mtc_status status;
  if (!t->slot_ready || offset + length > t->piece_bytes) {
    if (t->slot_ready) {
      status = cuda_check(t->cu->cuEventRecord(slot->event, target->stream),
                          "cuEventRecord");
      if (status != MTC_OK) return status;
      slot->recorded = 1;
      t->slot = (t->slot + 1) % MTC_PIECE_RING;
      slot = &t->pieces[t->slot];
    }
    if (slot->buffer.ptr == NULL) {
      status = mtc_pinned_acquire(target, t->piece_bytes, &slot->buffer);
      if (status != MTC_OK) return status;
      keep_pinned(plan, &slot->buffer);
      status = mtc_device_event_acquire(target, &slot->event);
      if (status != MTC_OK) return status;
      mtc_plan_event *held = &plan->held_events[plan->held_count++];
      held->device = target;
      held->event = slot->event;
      held->complete = 0;
    } else if (slot->recorded) {
      status = cuda_check(t->cu->cuEventSynchronize(slot->event),
                          "cuEventSynchronize");
      if (status != MTC_OK) return status;
    }
    t->slot_ready = 1;
    offset = 0;
  }
  t->slot_fill = offset + length;
  *out = (unsigned char *)slot->buffer.ptr + offset;
  return MTC_OK;
}

static mtc_status stream_own_leaf(transfer *t, mtc_device *target,
                                  const mtc_leaf *leaf, CUdeviceptr dst) {
  for (uint64_t done = 0; done < leaf->bytes;) {
    uint64_t length = leaf->bytes - done;
    if (length > t->piece_bytes) length = t->piece_bytes;
    unsigned char *piece;
    mtc_status status = piece_space(t, target, (size_t)length, &piece);
    if (status != MTC_OK) return status;
    mtc_stage_segment seg = leaf_segment(leaf, piece);
    seg.begin = done;
    seg.end = done + length;
    mtc_stage_copy(&seg, 1, t->plan->options.staging_threads);
    status = cuda_check(t->cu->cuMemcpyHtoDAsync_v2(dst + done, piece,
                                                    (size_t)length,
                                                    target->stream),
                        "cuMemcpyHtoDAsync");
    if (status != MTC_OK) return status;
    done += length;
  }
  return MTC_OK;
}

static mtc_status copy_own_leaf(transfer *t, const mtc_leaf *leaf,
                                mtc_block **out) {
  mtc_plan *plan = t->plan;
  mtc_block *block = NULL;
  mtc_status status;

  if (leaf->device == MTC_DEVICE_CPU && plan->target == MTC_DEVICE_CPU) {
    status = mtc_block_new_host(leaf->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    mtc_stage_segment seg =
        leaf_segment(leaf, (unsigned char *)(uintptr_t)block->address);
    mtc_stage_copy(&seg, 1, plan->options.staging_threads);
    return MTC_OK;
  }

  if (leaf->device == MTC_DEVICE_CPU) {
    mtc_device *target;
    status = enter_device(t, plan->target, &target);
    if (status != MTC_OK) return status;
    status = mtc_block_new_device(target, leaf->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    if (plan->options.use_pinned_staging) {
      return stream_own_leaf(t, target, leaf, (CUdeviceptr)block->address);
    }
    const void *src = (const void *)(uintptr_t)leaf->address;
    if (leaf->row_count > 1) {
      /* The driver copies one contiguous range: densify first. */
      unsigned char *dense = malloc((size_t)leaf->bytes);
      if (dense == NULL) return out_of_memory();
      keep_host(plan, dense);
      mtc_stage_segment seg = leaf_segment(leaf, dense);
      mtc_stage_copy(&seg, 1, plan->options.staging_threads);
      src = dense;
    }
    return cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                                  src, (size_t)leaf->bytes,
                                                  target->stream),
                      "cuMemcpyHtoDAsync");
  }

  if (plan->target == MTC_DEVICE_CPU) {
    mtc_device *source;
    status = enter_device(t, leaf->device, &source);
    if (status != MTC_OK) return status;
    status = mtc_block_new_pinned(source, leaf->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    return cuda_check(t->cu->cuMemcpyDtoHAsync_v2(
                          (void *)(uintptr_t)block->address,
                          (CUdeviceptr)leaf->address, (size_t)leaf->bytes,
                          source->stream),
                      "cuMemcpyDtoHAsync");
  }

  mtc_device *source, *target;
  status = mtc_device_get(leaf->device, &source);
  if (status != MTC_OK) return status;
  status = enter_device(t, plan->target, &target);
  if (status != MTC_OK) return status;
  status = mtc_block_new_device(target, leaf->bytes, &block);
  if (status != MTC_OK) return status;
  keep_block(plan, block);
  *out = block;
  return cuda_check(t->cu->cuMemcpyPeerAsync(block->address, target->context,
                                             leaf->address, source->context,
                                             (size_t)leaf->bytes,
                                             target->stream),
                    "cuMemcpyPeerAsync");
}

/* ------------------------------------------------------------------ driver */

static mtc_status record_completion(transfer *t) {
  mtc_plan *plan = t->plan;
  if (t->used_count == 0) return MTC_OK;
  plan->events = calloc(t->used_count, sizeof *plan->events);
  if (plan->events == NULL) return out_of_memory();
  for (size_t i = 0; i < t->used_count; i++) {
    mtc_device *device = t->used[i];
    mtc_status status = mtc_context_scope_use(&t->scope, device);
    if (status != MTC_OK) return status;
    CUevent event;
    status = mtc_device_event_acquire(device, &event);
    if (status != MTC_OK) return status;
    mtc_plan_event *e = &plan->events[plan->event_count++];
    e->device = device;
    e->event = event;
    e->complete = 0;
    status = cuda_check(t->cu->cuEventRecord(event, device->stream),
                        "cuEventRecord");
    if (status != MTC_OK) return status;
  }
  return MTC_OK;
}

static void fill_results(mtc_plan *plan, mtc_block **chunk_blocks,
                         mtc_block **own_blocks) {
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    const mtc_leaf *leaf = &plan->leaves[i];
    const mtc_placement *place = &plan->layout.placements[i];
    mtc_leaf_result *r = &plan->results[i];
    memset(r, 0, sizeof *r);
    r->device = plan->target;
    switch (place->kind) {
      case MTC_PLACE_ZERO:
        break;
      case MTC_PLACE_REUSED:
        r->address = leaf->address;
        r->device = leaf->device;
        r->flags = MTC_RESULT_REUSED;
        break;
      case MTC_PLACE_PACKED:
        r->block = chunk_blocks[place->chunk];
        r->offset = place->offset;
        r->address = r->block->address + place->offset;
        r->flags = MTC_RESULT_PACKED;
        break;
      case MTC_PLACE_OWN:
        r->block = own_blocks[i];
        r->address = r->block->address;
        break;
    }
  }
}

/* Undoes a failed submission: waits for enqueued work, then lets go of
 * everything the plan acquired. */
static void abort_transfer(transfer *t) {
  mtc_plan *plan = t->plan;
  for (size_t i = 0; i < t->used_count; i++) {
    if (mtc_context_scope_use(&t->scope, t->used[i]) == MTC_OK) {
      t->cu->cuStreamSynchronize(t->used[i]->stream);
    }
  }
  mtc_transfer_return_staging(plan);
  for (size_t i = 0; i < plan->block_count; i++) {
    mtc_block_release(plan->blocks[i]);
  }
  plan->block_count = 0;
  for (size_t i = 0; i < plan->event_count; i++) {
    mtc_device_event_release(plan->events[i].device, plan->events[i].event);
  }
  plan->event_count = 0;
  for (size_t i = 0; i < plan->held_count; i++) {
    mtc_device_event_release(plan->held_events[i].device,
                             plan->held_events[i].event);
  }
  plan->held_count = 0;
}

mtc_status mtc_transfer_run(mtc_plan *plan) {
  transfer t;
  memset(&t, 0, sizeof t);
  t.plan = plan;
  mtc_context_scope_begin(&t.scope);

  /* Piece buffers hold all own host->device leaves at once when they are
   * small (padding included), else staging_piece_bytes. */
  uint64_t own_staged = 0;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    const mtc_leaf *leaf = &plan->leaves[i];
    if (plan->layout.placements[i].kind == MTC_PLACE_OWN &&
        leaf->device == MTC_DEVICE_CPU && plan->target != MTC_DEVICE_CPU) {
      own_staged += leaf->bytes + PIECE_ALIGNMENT;
      if (own_staged >= plan->options.staging_piece_bytes) break;
    }
  }
  t.piece_bytes = own_staged < plan->options.staging_piece_bytes
                      ? (size_t)own_staged
                      : (size_t)plan->options.staging_piece_bytes;

  chunk_members members = {NULL, NULL};
  mtc_block **chunk_blocks =
      calloc(plan->layout.chunk_count + 1, sizeof *chunk_blocks);
  mtc_block **own_blocks = calloc(plan->leaf_count + 1, sizeof *own_blocks);
  mtc_status status =
      (chunk_blocks && own_blocks) ? MTC_OK : out_of_memory();
  if (status == MTC_OK) status = group_chunk_members(plan, &members);

  for (size_t c = 0; status == MTC_OK && c < plan->layout.chunk_count; c++) {
    uint64_t first = members.first[c];
    status = copy_chunk(&t, c, &members.leaves[first],
                        members.first[c + 1] - first, &chunk_blocks[c]);
  }
  for (uint64_t i = 0; status == MTC_OK && i < plan->leaf_count; i++) {
    if (plan->layout.placements[i].kind != MTC_PLACE_OWN) continue;
    status = copy_own_leaf(&t, &plan->leaves[i], &own_blocks[i]);
  }
  if (status == MTC_OK) status = record_completion(&t);

  if (status == MTC_OK) {
    fill_results(plan, chunk_blocks, own_blocks);
  } else {
    abort_transfer(&t);
  }
  mtc_context_scope_end(&t.scope);
  free(members.first);
  free(members.leaves);
  free(chunk_blocks);
  free(own_blocks);
  free(t.used);
  return status;
}

void mtc_transfer_return_staging(mtc_plan *plan) {
  for (size_t i = 0; i < plan->staging_count; i++) {
    mtc_plan_staging *s = &plan->staging[i];
    if (s->pinned.ptr != NULL) {
      mtc_pinned_release(&s->pinned);
    } else {
      free(s->host);
    }
  }
  plan->staging_count = 0;
}
