/* transfer.c — the copies of one plan, by direction:
 *
 *   host -> device  packed chunk: stage all its leaves into one buffer, one
 *                   H2D copy. Own leaf: stream through pinned pieces, so
 *                   staging piece k+1 overlaps the DMA of piece k.
 *   device -> host  pinned host block per chunk / own leaf. Packed leaves of
 *                   one source device: one gather kernel on its copy stream
 *                   that writes every leaf straight into the pinned blocks
 *                   (when kernels are built in), else one D2H copy per leaf.
 *                   Own (large) leaves: one D2H copy each.
 *   device -> device  block on the target. Packed leaves of one source
 *                   device: one gather kernel on the source's copy stream
 *                   that writes into the target's blocks (when kernels are
 *                   built in and the pair has peer access), else one peer
 *                   copy per leaf on the target's stream.
 *   host -> host    dense copies of strided leaves into malloc'd blocks.
 *
 * Ordering: before the first copy that reads leaves of a device whose
 * stream the caller set, the copy stream that runs it waits on the event
 * submit recorded there. At the end the other copy streams are joined into
 * one (the target's, or the first source's for copies to the host) and one
 * completion event is recorded there; a caller's stream on the target waits
 * on it.
 *
 * Why the gather kernel writes into pinned memory directly (device -> host)
 * rather than into a device scratch block followed by one DMA: pinned
 * memory is device-addressable under unified addressing, and writing it
 * from the kernel saves a scratch allocation, a second operation on the
 * stream and its latency; the leaves it handles are small (packed), so the
 * copy is dominated by launch and PCIe latency, not by bandwidth.
 *
 * Why device -> device gathers run on the source device, writing to the
 * target ("push"), not on the target reading the source: the source leaves
 * may come from any allocator (another library's memory pool, whose peer
 * access we cannot grant), while the outputs always come from our own pool,
 * which cuMemPoolSetAccess opens to the source device. */
#include "transfer.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "stage_copy.h"

/* Fewest packed leaves of one source device worth a gather kernel: below
 * it one DMA per leaf costs no more than one launch. */
#define MTC_GATHER_MIN_LEAVES 2

typedef struct piece_slot {
  mtc_pinned_buffer buffer;
  CUevent event;
  int recorded; /* event follows every DMA that read this buffer */
} piece_slot;

/* Pieces in one piece buffer start at multiples of this. */
#define PIECE_ALIGNMENT 256

/* A copy stream that already waits on the event recorded on the caller's
 * stream of a source device. */
typedef struct source_wait {
  mtc_device *stream_owner;
  int32_t source;
} source_wait;

typedef struct transfer {
  mtc_plan *plan;
  const mtc_cuda_api *cu; /* NULL until a device is involved */
  mtc_context_scope scope;
  mtc_plan_stats *stats;
  /* Devices whose copy stream got work: joined into one completion. */
  mtc_device **used;
  size_t used_count, used_capacity;
  source_wait *waits;
  size_t wait_count, wait_capacity;
  /* Pinned buffers that own host->device leaves are streamed through, in
   * pieces of at most piece_bytes. Small leaves share a buffer (one piece
   * each); a buffer is refilled only after the DMAs that read it. */
  piece_slot pieces[MTC_PIECE_RING];
  size_t piece_bytes;
  size_t slot;      /* the buffer being filled */
  size_t slot_fill; /* bytes of it handed out */
  int slot_ready;   /* pieces[slot] may take pieces */
  int64_t failed_leaf; /* the leaf a failure is about, or -1 */
} transfer;

static mtc_status out_of_memory(void) {
  return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
}

/* Makes room for `needed` items of `size` bytes in *items. */
static int grow(void *items, size_t *capacity, size_t needed, size_t size) {
  if (needed <= *capacity) return 0;
  size_t grown = *capacity ? *capacity * 2 : 4;
  if (grown < needed) grown = needed;
  void *more = realloc(*(void **)items, grown * size);
  if (more == NULL) return -1;
  *(void **)items = more;
  *capacity = grown;
  return 0;
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
    if (grow(&t->used, &t->used_capacity, t->used_count + 1, sizeof *t->used)) {
      return out_of_memory();
    }
    t->used[t->used_count++] = device;
  }
  *out = device;
  return MTC_OK;
}

static mtc_status cuda_check(CUresult r, const char *what) {
  return r == CUDA_SUCCESS ? MTC_OK : mtc_cuda_fail(r, what);
}

/* Before copies on stream_owner's copy stream (its context current) read
 * leaves of `source`: when the caller set a stream on that device, the copy
 * stream waits on the event submit recorded there. Once per pair. */
static mtc_status order_after_source(transfer *t, mtc_device *stream_owner,
                                     int32_t source) {
  mtc_plan *plan = t->plan;
  CUevent ready = NULL;
  for (size_t i = 0; i < plan->stream_count; i++) {
    if (plan->streams[i].device->ordinal == source) {
      ready = plan->streams[i].ready;
    }
  }
  if (ready == NULL) return MTC_OK;
  for (size_t i = 0; i < t->wait_count; i++) {
    if (t->waits[i].stream_owner == stream_owner &&
        t->waits[i].source == source) {
      return MTC_OK;
    }
  }
  if (grow(&t->waits, &t->wait_capacity, t->wait_count + 1, sizeof *t->waits)) {
    return out_of_memory();
  }
  t->waits[t->wait_count].stream_owner = stream_owner;
  t->waits[t->wait_count].source = source;
  t->wait_count++;
  CUresult r = t->cu->cuStreamWaitEvent(stream_owner->stream, ready, 0);
  if (r == CUDA_SUCCESS) return MTC_OK;
  char what[96];
  mtc_format(what, sizeof what,
             "cuStreamWaitEvent (on the stream set for cuda:%d)", source);
  return mtc_cuda_fail(r, what);
}

/* The plan keeps event (of device) until it is released. On failure the
 * event goes back at once. */
static mtc_status hold_event(transfer *t, mtc_device *device, CUevent event) {
  mtc_plan *plan = t->plan;
  if (grow(&plan->held_events, &plan->held_capacity, plan->held_count + 1,
           sizeof *plan->held_events)) {
    mtc_device_event_release(device, event);
    return out_of_memory();
  }
  plan->held_events[plan->held_count].device = device;
  plan->held_events[plan->held_count].event = event;
  plan->held_count++;
  return MTC_OK;
}

/* A new event of device (its context current), recorded on its copy
 * stream and held by the plan. */
static mtc_status record_held_event(transfer *t, mtc_device *device,
                                    CUevent *out) {
  mtc_status status = mtc_device_event_acquire(device, out);
  if (status != MTC_OK) return status;
  status = hold_event(t, device, *out);
  if (status != MTC_OK) return status;
  return cuda_check(t->cu->cuEventRecord(*out, device->stream),
                    "cuEventRecord");
}

static void count_pinned(transfer *t, const mtc_pinned_buffer *buffer) {
  if (buffer->reused) {
    t->stats->pinned_reuses++;
  } else {
    t->stats->pinned_allocations++;
  }
}

static void note_device_to_host(transfer *t, uint32_t path) {
  if (t->stats->device_to_host_path < path) {
    t->stats->device_to_host_path = path;
  }
}

/* mtc_stage_copy, timed; a read of the leaves' host memory, so it fails
 * once mtc_plan_stop_reading has run. */
static mtc_status stage(transfer *t, const mtc_stage_segment *segments,
                        size_t count) {
  mtc_status status = mtc_plan_read_begin(t->plan);
  if (status != MTC_OK) return status;
  uint64_t start = mtc_clock_ns();
  mtc_stage_copy(segments, count, t->plan->options.staging_threads);
  t->stats->staging_ns += mtc_clock_ns() - start;
  mtc_plan_read_end(t->plan);
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
  mtc_status status = stage(t, segments, count);
  free(segments);
  return status;
}

/* Whether accessor may reach owner's memory, setting that up on first use.
 * A failure only costs speed (the caller falls back to copies that work
 * either way), so it is no error of the plan's: the thread's last error is
 * left as it was. */
static int peer_usable(mtc_device *accessor, mtc_device *owner) {
  char saved[MTC_ERROR_CAPACITY];
  mtc_format(saved, sizeof saved, "%s", mtc_error_text());
  int usable = 0;
  if (mtc_device_enable_peer(accessor, owner, &usable) != MTC_OK) usable = 0;
  mtc_error_set_text(MTC_OK, saved);
  return usable;
}

/* Peer copies run on the target's copy stream: enters the target, lets it
 * read the source's memory directly where the pair allows (else the driver
 * stages the copies through the host: slower, still correct), and orders
 * the copies after the caller's stream on the source. */
static mtc_status enter_peer_copy(transfer *t, mtc_device *source,
                                  mtc_device **out_target) {
  mtc_device *target;
  mtc_status status = enter_device(t, t->plan->target, &target);
  if (status != MTC_OK) return status;
  (void)peer_usable(target, source);
  /* Setting peer access up may have switched contexts. */
  status = mtc_context_scope_use(&t->scope, target);
  if (status != MTC_OK) return status;
  status = order_after_source(t, target, source->ordinal);
  if (status != MTC_OK) return status;
  *out_target = target;
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
    unsigned char *staged;
    if (plan->options.use_pinned_staging) {
      mtc_pinned_buffer buffer;
      status = mtc_pinned_acquire(target, (size_t)chunk->bytes, &buffer);
      if (status != MTC_OK) return status;
      keep_pinned(plan, &buffer);
      count_pinned(t, &buffer);
      staged = buffer.ptr;
    } else {
      staged = malloc((size_t)chunk->bytes);
      if (staged == NULL) return out_of_memory();
      keep_host(plan, staged);
    }
    status = stage_chunk(t, members, count, staged);
    if (status != MTC_OK) return status;
    status = mtc_block_new_device(target, chunk->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    *out = block;
    t->stats->copies_issued++;
    return cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                                  staged, (size_t)chunk->bytes,
                                                  target->stream),
                      "cuMemcpyHtoDAsync");
  }

  if (plan->target == MTC_DEVICE_CPU) {
    mtc_device *source;
    status = enter_device(t, chunk->source_device, &source);
    if (status != MTC_OK) return status;
    status = order_after_source(t, source, chunk->source_device);
    if (status != MTC_OK) return status;
    status = mtc_block_new_pinned(source, chunk->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    count_pinned(t, &block->pinned);
    *out = block;
    note_device_to_host(t, MTC_PATH_PER_LEAF);
    t->stats->copies_issued += count;
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
  status = enter_peer_copy(t, source, &target);
  if (status != MTC_OK) return status;
  status = mtc_block_new_device(target, chunk->bytes, &block);
  if (status != MTC_OK) return status;
  keep_block(plan, block);
  *out = block;
  t->stats->copies_issued += count;
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
      count_pinned(t, &slot->buffer);
      status = mtc_device_event_acquire(target, &slot->event);
      if (status != MTC_OK) return status;
      status = hold_event(t, target, slot->event);
      if (status != MTC_OK) {
        slot->event = NULL;
        return status;
      }
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
    status = stage(t, &seg, 1);
    if (status != MTC_OK) return status;
    t->stats->copies_issued++;
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
    return stage(t, &seg, 1);
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
      status = stage(t, &seg, 1);
      if (status != MTC_OK) return status;
      src = dense;
    }
    t->stats->copies_issued++;
    /* The driver reads pageable memory before the call returns. */
    status = mtc_plan_read_begin(plan);
    if (status != MTC_OK) return status;
    status = cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address,
                                                    src, (size_t)leaf->bytes,
                                                    target->stream),
                        "cuMemcpyHtoDAsync");
    mtc_plan_read_end(plan);
    return status;
  }

  if (plan->target == MTC_DEVICE_CPU) {
    mtc_device *source;
    status = enter_device(t, leaf->device, &source);
    if (status != MTC_OK) return status;
    status = order_after_source(t, source, leaf->device);
    if (status != MTC_OK) return status;
    status = mtc_block_new_pinned(source, leaf->bytes, &block);
    if (status != MTC_OK) return status;
    keep_block(plan, block);
    count_pinned(t, &block->pinned);
    *out = block;
    note_device_to_host(t, MTC_PATH_PER_LEAF);
    t->stats->copies_issued++;
    return cuda_check(t->cu->cuMemcpyDtoHAsync_v2(
                          (void *)(uintptr_t)block->address,
                          (CUdeviceptr)leaf->address, (size_t)leaf->bytes,
                          source->stream),
                      "cuMemcpyDtoHAsync");
  }

  mtc_device *source, *target;
  status = mtc_device_get(leaf->device, &source);
  if (status != MTC_OK) return status;
  status = enter_peer_copy(t, source, &target);
  if (status != MTC_OK) return status;
  status = mtc_block_new_device(target, leaf->bytes, &block);
  if (status != MTC_OK) return status;
  keep_block(plan, block);
  *out = block;
  t->stats->copies_issued++;
  return cuda_check(t->cu->cuMemcpyPeerAsync(block->address, target->context,
                                             leaf->address, source->context,
                                             (size_t)leaf->bytes,
                                             target->stream),
                    "cuMemcpyPeerAsync");
}

/* ------------------------------------------------------------------ gather */

/* Gathers every packed leaf of one source device with one kernel launch on
 * the source's copy stream: into pinned host blocks (target host), or into
 * device blocks of the target (pushed over peer access). Leaves *done at 0,
 * having enqueued nothing, when the path does not apply: too few leaves, no
 * kernels, or no peer access between the pair. */
/* Names chunk c's first leaf as the one a failure is about; the message
 * says it was not alone. */
static void blame_chunk(transfer *t, const chunk_members *members, size_t c) {
  uint64_t first = members->first[c];
  uint64_t count = members->first[c + 1] - first;
  t->failed_leaf = (int64_t)members->leaves[first];
  if (count > 1) {
    char text[MTC_ERROR_CAPACITY];
    mtc_format(text, sizeof text, "%s", mtc_error_text());
    mtc_error_set(MTC_OK, "%s (for the chunk that packs this leaf and %llu "
                  "others)", text, (unsigned long long)(count - 1));
  }
}

static mtc_status gather_source(transfer *t, int32_t source_ordinal,
                                const chunk_members *members,
                                mtc_block **chunk_blocks, int *done) {
  mtc_plan *plan = t->plan;
  const mtc_layout *layout = &plan->layout;
  *done = 0;
  uint64_t leaves = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device == source_ordinal) {
      leaves += layout->chunks[c].leaf_count;
    }
  }
  if (leaves < MTC_GATHER_MIN_LEAVES || leaves > UINT32_MAX) return MTC_OK;

  mtc_device *source, *target = NULL;
  mtc_status status = mtc_device_get(source_ordinal, &source);
  if (status != MTC_OK) return status;
  /* Loads the module on first use, in the source's own context. */
  if (!mtc_kernels_available(source)) return MTC_OK;
  if (plan->target != MTC_DEVICE_CPU) {
    status = mtc_device_get(plan->target, &target);
    if (status != MTC_OK) return status;
    /* Without peer access the per-leaf peer copies still work. */
    if (!peer_usable(source, target)) return MTC_OK;
  }
  *done = 1;

  /* The output blocks. Device blocks are allocated in stream order on the
   * target's copy stream: the source's stream waits for that. */
  CUevent allocated = NULL;
  if (target != NULL) {
    status = enter_device(t, plan->target, &target);
    if (status != MTC_OK) return status;
  }
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device != source_ordinal) continue;
    mtc_block *block;
    if (target != NULL) {
      status = mtc_block_new_device(target, layout->chunks[c].bytes, &block);
    } else {
      status = mtc_block_new_pinned(source, layout->chunks[c].bytes, &block);
    }
    if (status != MTC_OK) {
      blame_chunk(t, members, c);
      return status;
    }
    keep_block(plan, block);
    if (target == NULL) count_pinned(t, &block->pinned);
    chunk_blocks[c] = block;
  }
  if (target != NULL) {
    status = record_held_event(t, target, &allocated);
    if (status != MTC_OK) return status;
  }

  status = enter_device(t, source_ordinal, &source);
  if (status != MTC_OK) return status;
  if (allocated != NULL) {
    status = cuda_check(t->cu->cuStreamWaitEvent(source->stream, allocated, 0),
                        "cuStreamWaitEvent");
    if (status != MTC_OK) return status;
  }
  status = order_after_source(t, source, source_ordinal);
  if (status != MTC_OK) return status;

  /* The segment table: pinned, read by the kernel, returned with the
   * plan's staging once the copy has completed. */
  mtc_pinned_buffer table_buffer;
  status = mtc_pinned_acquire(source, (size_t)leaves * sizeof(mtc_segment),
                              &table_buffer);
  if (status != MTC_OK) return status;
  keep_pinned(plan, &table_buffer);
  count_pinned(t, &table_buffer);
  mtc_segment *table = table_buffer.ptr;
  uint64_t n = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device != source_ordinal) continue;
    for (uint64_t m = members->first[c]; m < members->first[c + 1]; m++) {
      uint64_t leaf = members->leaves[m];
      table[n].src = plan->leaves[leaf].address;
      table[n].dst = chunk_blocks[c]->address + layout->placements[leaf].offset;
      table[n].bytes = plan->leaves[leaf].bytes;
      n++;
    }
  }
  t->stats->copies_issued++;
  if (target == NULL) note_device_to_host(t, MTC_PATH_GATHER_KERNEL);
  return mtc_kernels_copy_segments(source, source->stream, table,
                                   (uint32_t)n);
}

/* ------------------------------------------------------------------ driver */

/* Joins every used copy stream into one and records the plan's completion
 * event there: the target's stream, or the first source's for copies to
 * the host. A caller's stream on the target then waits on it. */
static mtc_status record_completion(transfer *t) {
  mtc_plan *plan = t->plan;
  if (t->used_count == 0) return MTC_OK;
  mtc_device *primary = t->used[0];
  for (size_t i = 0; i < t->used_count; i++) {
    if (t->used[i]->ordinal == plan->target) primary = t->used[i];
  }
  mtc_status status;
  for (size_t i = 0; i < t->used_count; i++) {
    mtc_device *device = t->used[i];
    if (device == primary) continue;
    status = mtc_context_scope_use(&t->scope, device);
    if (status != MTC_OK) return status;
    CUevent done;
    status = record_held_event(t, device, &done);
    if (status != MTC_OK) return status;
    status = mtc_context_scope_use(&t->scope, primary);
    if (status != MTC_OK) return status;
    status = cuda_check(t->cu->cuStreamWaitEvent(primary->stream, done, 0),
                        "cuStreamWaitEvent");
    if (status != MTC_OK) return status;
  }

  status = mtc_context_scope_use(&t->scope, primary);
  if (status != MTC_OK) return status;
  CUevent event;
  status = mtc_device_event_acquire(primary, &event);
  if (status != MTC_OK) return status;
  status = mtc_event_wrap(primary, event, &plan->completion);
  if (status != MTC_OK) return status;
  status = cuda_check(t->cu->cuEventRecord(event, primary->stream),
                      "cuEventRecord");
  if (status != MTC_OK) return status;

  CUstream user = mtc_plan_target_stream(plan);
  if (user != NULL && primary->ordinal == plan->target) {
    CUresult r = t->cu->cuStreamWaitEvent(user, event, 0);
    if (r != CUDA_SUCCESS) {
      char what[96];
      mtc_format(what, sizeof what,
                 "cuStreamWaitEvent (the stream set for cuda:%d waits on the "
                 "copy)",
                 plan->target);
      return mtc_cuda_fail(r, what);
    }
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
  mtc_event_release(plan->completion);
  plan->completion = NULL;
  for (size_t i = 0; i < plan->held_count; i++) {
    mtc_device_event_release(plan->held_events[i].device,
                             plan->held_events[i].event);
  }
  plan->held_count = 0;
}

mtc_status mtc_transfer_run(mtc_plan *plan, mtc_plan_stats *stats,
                            int64_t *failed_leaf) {
  transfer t;
  memset(&t, 0, sizeof t);
  t.failed_leaf = -1;
  t.plan = plan;
  t.stats = stats;
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
  /* Per chunk: 0 to copy on its own, 1 gathered, 2 its source declined. */
  unsigned char *gathered = calloc(plan->layout.chunk_count + 1, 1);
  mtc_status status =
      (chunk_blocks && own_blocks && gathered) ? MTC_OK : out_of_memory();
  if (status == MTC_OK) status = group_chunk_members(plan, &members);

  /* Gathers first: the GPU gathers while the host stages the rest. */
  for (size_t c = 0; status == MTC_OK && c < plan->layout.chunk_count; c++) {
    int32_t source = plan->layout.chunks[c].source_device;
    if (source == MTC_DEVICE_CPU || gathered[c] != 0) continue;
    int done = 0;
    status = gather_source(&t, source, &members, chunk_blocks, &done);
    for (size_t d = c; d < plan->layout.chunk_count; d++) {
      if (plan->layout.chunks[d].source_device == source) {
        gathered[d] = done ? 1 : 2;
      }
    }
  }
  for (size_t c = 0; status == MTC_OK && c < plan->layout.chunk_count; c++) {
    if (gathered[c] == 1) continue;
    uint64_t first = members.first[c];
    status = copy_chunk(&t, c, &members.leaves[first],
                        members.first[c + 1] - first, &chunk_blocks[c]);
    if (status != MTC_OK) blame_chunk(&t, &members, c);
  }
  for (uint64_t i = 0; status == MTC_OK && i < plan->leaf_count; i++) {
    if (plan->layout.placements[i].kind != MTC_PLACE_OWN) continue;
    status = copy_own_leaf(&t, &plan->leaves[i], &own_blocks[i]);
    if (status != MTC_OK) t.failed_leaf = (int64_t)i;
  }
  if (status == MTC_OK) status = record_completion(&t);

  if (status == MTC_OK) {
    fill_results(plan, chunk_blocks, own_blocks);
  } else {
    abort_transfer(&t);
  }
  mtc_context_scope_end(&t.scope);
  *failed_leaf = t.failed_leaf;
  stats->blocks = plan->block_count;
  stats->submit_ns = mtc_clock_ns() - plan->submit_start_ns;
  free(members.first);
  free(members.leaves);
  free(chunk_blocks);
  free(own_blocks);
  free(gathered);
  free(t.used);
  free(t.waits);
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
