/* transfer.c — carrying out a laid-out plan: gathers first (the GPU gathers
 * while the host stages the rest), then the own leaves, then every other
 * packed chunk, each by its direction (directions.h; into.c for copies into
 * existing memory); then one completion event for the whole copy. On failure it waits for what it enqueued and
 * lets go of everything the plan acquired.
 *
 * Ordering: before the first copy that reads leaves of a device whose
 * stream the caller set, the copy stream that runs it waits on the event
 * submit recorded there. At the end the other copy streams are joined into
 * one (the target's, or the first source's for copies to the host) and one
 * completion event is recorded there; a caller's stream on the target waits
 * on it. */
#include "run/transfer.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "run/copy_out.h"
#include "run/directions.h"
#include "run/into.h"

static mtc_status copy_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                             uint64_t count, mtc_block **out) {
  int32_t source = t->plan->layout.chunks[c].source_device;
  int32_t target = t->plan->target;
  if (source == MTC_DEVICE_CPU && target == MTC_DEVICE_CPU) {
    return mtc_host_chunk(t, c, members, count, out);
  }
  if (source == MTC_DEVICE_CPU) return mtc_to_device_chunk(t, c, members, count, out);
  if (target == MTC_DEVICE_CPU) return mtc_to_host_chunk(t, c, members, count, out);
  return mtc_peer_chunk(t, c, members, count, out);
}

static mtc_status copy_own_leaf(mtc_transfer *t, uint64_t index,
                                mtc_block **out) {
  const mtc_leaf *leaf = &t->plan->leaves[index];
  int32_t target = t->plan->target;
  if (leaf->device == MTC_DEVICE_CPU && target == MTC_DEVICE_CPU) {
    return mtc_host_own_leaf(t, leaf, out);
  }
  if (leaf->device == MTC_DEVICE_CPU) return mtc_to_device_own_leaf(t, leaf, out);
  if (target == MTC_DEVICE_CPU) return mtc_to_host_own_leaf(t, index, out);
  return mtc_peer_own_leaf(t, index, out);
}

/* Joins every used copy stream into one and records the plan's completion
 * event there: the target's stream, or the first source's for copies to
 * the host. A caller's stream on the target then waits on it. */
static mtc_status record_completion(mtc_transfer *t) {
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
    status = mtc_transfer_record_event(t, device, &done);
    if (status != MTC_OK) return status;
    status = mtc_context_scope_use(&t->scope, primary);
    if (status != MTC_OK) return status;
    status = mtc_cuda_check(t->cu->cuStreamWaitEvent(primary->stream, done, 0),
                        "cuStreamWaitEvent");
    if (status != MTC_OK) return status;
  }

  status = mtc_context_scope_use(&t->scope, primary);
  /* A copy-out into pinned blocks follows the completion: the earlier
   * copies that use them come first. */
  if (status == MTC_OK) status = mtc_transfer_order_after_pinned(t, primary);
  if (status != MTC_OK) return status;
  CUevent event;
  status = mtc_device_event_acquire(primary, &event);
  if (status != MTC_OK) return status;
  status = mtc_event_wrap(primary, event, &plan->completion);
  if (status != MTC_OK) return status;
  status = mtc_cuda_check(t->cu->cuEventRecord(event, primary->stream),
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
        if (plan->layout.chunks[place->chunk].direct_address != 0) {
          r->flags |= MTC_RESULT_DIRECT;
        }
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
static void abort_transfer(mtc_transfer *t) {
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

/* The host reads or writes some pinned blocks for this copy
 * (MTC_PINNED_HOST: staging, host copies, a copy-out): only after the copies
 * before it that use them are over, since their DMA may still read or write
 * them (the GPU's reads and writes are ordered on its streams instead). */
static mtc_status wait_host_pinned(const mtc_plan *plan) {
  for (size_t k = 0; k < plan->pinned_count; k++) {
    if (!(plan->pinned_how[k] & MTC_PINNED_HOST)) continue;
    mtc_status status = mtc_block_wait_uses(plan->pinned[k]);
    if (status != MTC_OK) return status;
  }
  return MTC_OK;
}

/* Every leaf of a plan of new outputs: gathers first (the GPU gathers
 * while the host stages the rest), then the own leaves, then the chunks:
 * an own leaf's DMA is long, and the chunks (whose DMAs are short) are
 * staged while it runs. */
static mtc_status copy_all(mtc_transfer *t, const mtc_chunk_members *members,
                           mtc_block **chunk_blocks, mtc_block **own_blocks) {
  mtc_plan *plan = t->plan;
  /* Per chunk: 0 to copy on its own, 1 gathered, 2 its source declined. */
  unsigned char *gathered = calloc(plan->layout.chunk_count + 1, 1);
  if (gathered == NULL) return mtc_out_of_host_memory();
  mtc_status status = MTC_OK;
  for (size_t c = 0; status == MTC_OK && c < plan->layout.chunk_count; c++) {
    int32_t source = plan->layout.chunks[c].source_device;
    if (source == MTC_DEVICE_CPU || gathered[c] != 0) continue;
    int done = 0;
    status = mtc_gather_source(t, source, members, chunk_blocks, &done);
    for (size_t d = c; d < plan->layout.chunk_count; d++) {
      if (plan->layout.chunks[d].source_device == source) {
        gathered[d] = done ? 1 : 2;
      }
    }
  }
  for (uint64_t i = 0; status == MTC_OK && i < plan->leaf_count; i++) {
    if (plan->layout.placements[i].kind != MTC_PLACE_OWN) continue;
    status = copy_own_leaf(t, i, &own_blocks[i]);
    if (status != MTC_OK) t->failed_leaf = (int64_t)i;
  }
  for (size_t c = 0; status == MTC_OK && c < plan->layout.chunk_count; c++) {
    if (gathered[c] == 1) continue;
    uint64_t first = members->first[c];
    status = copy_chunk(t, c, &members->leaves[first],
                        members->first[c + 1] - first, &chunk_blocks[c]);
    if (status != MTC_OK) mtc_transfer_blame_chunk(t, members, c);
  }
  free(gathered);
  return status;
}

mtc_status mtc_transfer_run(mtc_plan *plan, mtc_plan_stats *stats,
                            int64_t *failed_leaf) {
  mtc_transfer t;
  memset(&t, 0, sizeof t);
  t.failed_leaf = -1;
  t.plan = plan;
  t.stats = stats;
  t.trace = mtc_trace_open(plan->submit_start_ns);
  if (t.trace != NULL) {
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < plan->leaf_count; i++) bytes += plan->leaves[i].bytes;
    mtc_trace_describe(t.trace, plan->target, plan->leaf_count, bytes,
                       plan->layout.chunk_count);
  }
  mtc_context_scope_begin(&t.scope);

  /* Piece buffers hold all own host->device leaves at once when they are
   * small (padding included), else staging_piece_bytes; never more than a
   * staging buffer may take (the pinned pool's limit / 4). */
  uint64_t piece_limit = plan->options.staging_piece_bytes;
  if (piece_limit > plan->staging_max_bytes) piece_limit = plan->staging_max_bytes;
  uint64_t own_staged = 0;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    const mtc_leaf *leaf = &plan->leaves[i];
    if (plan->layout.placements[i].kind == MTC_PLACE_OWN &&
        leaf->device == MTC_DEVICE_CPU && plan->target != MTC_DEVICE_CPU) {
      own_staged += leaf->bytes + MTC_PIECE_ALIGNMENT;
      if (own_staged >= piece_limit) break;
    }
  }
  t.piece_bytes = own_staged < piece_limit ? (size_t)own_staged : (size_t)piece_limit;

  mtc_chunk_members members = {NULL, NULL};
  mtc_block **chunk_blocks =
      calloc(plan->layout.chunk_count + 1, sizeof *chunk_blocks);
  mtc_block **own_blocks = calloc(plan->leaf_count + 1, sizeof *own_blocks);
  mtc_status status =
      (chunk_blocks && own_blocks) ? MTC_OK : mtc_out_of_host_memory();
  if (status == MTC_OK) status = mtc_chunk_members_group(plan, &members);
  if (status == MTC_OK) status = wait_host_pinned(plan);
  if (status == MTC_OK) {
    status = plan->destinations != NULL
                 ? mtc_into_run(&t, &members, chunk_blocks, own_blocks)
                 : copy_all(&t, &members, chunk_blocks, own_blocks);
  }
  if (status == MTC_OK) status = record_completion(&t);

  if (status == MTC_OK && plan->destinations != NULL) {
    mtc_into_fill_results(plan);
    mtc_plan_mark_copy_out_blocks(plan);
  } else if (status == MTC_OK) {
    fill_results(plan, chunk_blocks, own_blocks);
  } else {
    abort_transfer(&t);
  }
  mtc_trace_close(t.trace, status == MTC_OK ? "enqueued" : "failed");
  mtc_context_scope_end(&t.scope);
  *failed_leaf = t.failed_leaf;
  stats->blocks = plan->block_count;
  stats->submit_ns = mtc_clock_ns() - plan->submit_start_ns;
  free(members.first);
  free(members.leaves);
  free(chunk_blocks);
  free(own_blocks);
  free(t.used);
  free(t.waits);
  return status;
}
