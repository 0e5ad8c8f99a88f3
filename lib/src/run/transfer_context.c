/* transfer_context.c — the helpers every direction of copy uses (see
 * transfer_context.h). */
#include "run/transfer_context.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"

mtc_status mtc_out_of_host_memory(void) {
  return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
}

int mtc_grow_array(void *items, size_t *capacity, size_t needed, size_t size) {
  if (needed <= *capacity) return 0;
  size_t grown = *capacity ? *capacity * 2 : 4;
  if (grown < needed) grown = needed;
  void *more = realloc(*(void **)items, grown * size);
  if (more == NULL) return -1;
  *(void **)items = more;
  *capacity = grown;
  return 0;
}

mtc_status mtc_transfer_enter_device(mtc_transfer *t, int32_t ordinal, mtc_device **out) {
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
    if (mtc_grow_array(&t->used, &t->used_capacity, t->used_count + 1, sizeof *t->used)) {
      return mtc_out_of_host_memory();
    }
    t->used[t->used_count++] = device;
  }
  *out = device;
  return MTC_OK;
}

mtc_status mtc_transfer_order_after_pinned(mtc_transfer *t, mtc_device *device) {
  mtc_plan *plan = t->plan;
  uint64_t bit = device->ordinal < 64 ? (uint64_t)1 << device->ordinal : 0;
  if (plan->pinned_count == 0 || (t->pinned_ordered & bit)) return MTC_OK;
  for (size_t k = 0; k < plan->pinned_count; k++) {
    mtc_status status = mtc_block_order_after_uses(plan->pinned[k], device->stream);
    if (status != MTC_OK) return status;
  }
  t->pinned_ordered |= bit;
  return MTC_OK;
}

mtc_status mtc_transfer_order_after_source(mtc_transfer *t, mtc_device *stream_owner,
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
  if (mtc_grow_array(&t->waits, &t->wait_capacity, t->wait_count + 1, sizeof *t->waits)) {
    return mtc_out_of_host_memory();
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

mtc_status mtc_transfer_hold_event(mtc_transfer *t, mtc_device *device, CUevent event) {
  mtc_plan *plan = t->plan;
  if (mtc_grow_array(&plan->held_events, &plan->held_capacity, plan->held_count + 1,
           sizeof *plan->held_events)) {
    mtc_device_event_release(device, event);
    return mtc_out_of_host_memory();
  }
  plan->held_events[plan->held_count].device = device;
  plan->held_events[plan->held_count].event = event;
  plan->held_count++;
  return MTC_OK;
}

mtc_status mtc_transfer_record_event(mtc_transfer *t, mtc_device *device,
                                    CUevent *out) {
  mtc_status status = mtc_device_event_acquire(device, out);
  if (status != MTC_OK) return status;
  status = mtc_transfer_hold_event(t, device, *out);
  if (status != MTC_OK) return status;
  return mtc_cuda_check(t->cu->cuEventRecord(*out, device->stream),
                    "cuEventRecord");
}

void mtc_transfer_count_pinned(mtc_transfer *t, const mtc_pinned_buffer *buffer) {
  if (buffer->reused) {
    t->stats->pinned_reuses++;
  } else {
    t->stats->pinned_allocations++;
  }
}

void mtc_transfer_note_path(mtc_transfer *t, uint32_t path) {
  if (t->stats->device_to_host_path < path) {
    t->stats->device_to_host_path = path;
  }
}

mtc_status mtc_transfer_stage(mtc_transfer *t, const mtc_stage_segment *segments,
                        size_t count) {
  mtc_status status = mtc_plan_read_begin(t->plan);
  if (status != MTC_OK) return status;
  uint64_t start = mtc_clock_ns();
  mtc_stage_copy(segments, count, t->plan->options.staging_threads);
  t->stats->staging_ns += mtc_clock_ns() - start;
  for (size_t i = 0; i < count; i++) {
    t->stats->bytes_staged += segments[i].end - segments[i].begin;
  }
  mtc_plan_read_end(t->plan);
  return MTC_OK;
}

mtc_status mtc_transfer_stage_chunk(mtc_transfer *t, const uint64_t *members,
                              uint64_t count, unsigned char *dst) {
  mtc_plan *plan = t->plan;
  mtc_stage_segment *segments = malloc(count * sizeof *segments);
  if (segments == NULL) return mtc_out_of_host_memory();
  for (uint64_t i = 0; i < count; i++) {
    uint64_t leaf = members[i];
    segments[i] = mtc_leaf_segment(plan, &plan->leaves[leaf],
                               dst + plan->layout.placements[leaf].offset);
  }
  mtc_status status = mtc_transfer_stage(t, segments, count);
  free(segments);
  return status;
}

void mtc_plan_keep_block(mtc_plan *plan, mtc_block *block) {
  plan->blocks[plan->block_count++] = block;
}

void mtc_plan_keep_pinned(mtc_plan *plan, const mtc_pinned_buffer *buffer) {
  mtc_plan_staging *s = &plan->staging[plan->staging_count++];
  s->pinned = *buffer;
  s->host = NULL;
}

void mtc_plan_keep_host(mtc_plan *plan, void *host) {
  mtc_plan_staging *s = &plan->staging[plan->staging_count++];
  memset(&s->pinned, 0, sizeof s->pinned);
  s->host = host;
}

mtc_stage_segment mtc_leaf_segment(const mtc_plan *plan, const mtc_leaf *leaf,
                                   unsigned char *dst) {
  mtc_stage_segment seg;
  seg.dst = dst;
  seg.src = (const unsigned char *)(uintptr_t)leaf->address;
  seg.begin = 0;
  seg.end = leaf->bytes;
  seg.row_bytes = leaf->row_count > 1 ? leaf->bytes / leaf->row_count : 0;
  seg.row_pitch = leaf->row_count > 1 ? leaf->row_pitch : 0;
  seg.strided = mtc_plan_leaf_strided(plan, (uint64_t)(leaf - plan->leaves));
  return seg;
}

int mtc_peer_usable(mtc_device *accessor, mtc_device *owner) {
  char saved[MTC_ERROR_CAPACITY];
  mtc_format(saved, sizeof saved, "%s", mtc_error_text());
  int usable = 0;
  if (mtc_device_enable_peer(accessor, owner, &usable) != MTC_OK) usable = 0;
  mtc_error_set_text(MTC_OK, saved);
  return usable;
}

mtc_status mtc_transfer_enter_peer_copy(mtc_transfer *t, mtc_device *source,
                                  mtc_device **out_target) {
  mtc_device *target;
  mtc_status status = mtc_transfer_enter_device(t, t->plan->target, &target);
  if (status != MTC_OK) return status;
  (void)mtc_peer_usable(target, source);
  /* Setting peer access up may have switched contexts. */
  status = mtc_context_scope_use(&t->scope, target);
  if (status != MTC_OK) return status;
  status = mtc_transfer_order_after_source(t, target, source->ordinal);
  if (status != MTC_OK) return status;
  *out_target = target;
  return MTC_OK;
}

mtc_status mtc_chunk_members_group(const mtc_plan *plan,
                                      mtc_chunk_members *out) {
  return mtc_chunk_members_of(&plan->layout, plan->leaf_count, out);
}

mtc_status mtc_chunk_members_of(const mtc_layout *layout, uint64_t leaf_count,
                                mtc_chunk_members *out) {
  out->first = calloc(layout->chunk_count + 1, sizeof *out->first);
  out->leaves = malloc((leaf_count ? leaf_count : 1) * sizeof *out->leaves);
  if (out->first == NULL || out->leaves == NULL) return mtc_out_of_host_memory();
  for (size_t c = 0; c < layout->chunk_count; c++) {
    out->first[c + 1] = out->first[c] + layout->chunks[c].leaf_count;
  }
  uint64_t *fill = calloc(layout->chunk_count + 1, sizeof *fill);
  if (fill == NULL) return mtc_out_of_host_memory();
  for (uint64_t i = 0; i < leaf_count; i++) {
    const mtc_placement *place = &layout->placements[i];
    if (place->kind != MTC_PLACE_PACKED) continue;
    out->leaves[out->first[place->chunk] + fill[place->chunk]++] = i;
  }
  free(fill);
  return MTC_OK;
}

void mtc_transfer_blame_chunk(mtc_transfer *t,
                              const mtc_chunk_members *members, size_t c) {
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
