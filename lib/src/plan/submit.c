/* submit.c — mtc_plan_submit: lay the plan out, record the events that
 * order it after the caller's streams, then hand it to run/ on the
 * background thread (or run it here). */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "plan/phase.h"
#include "plan/submit.h"
#include "plan/validate.h"
#include "run/in_flight.h"
#include "run/trace_file.h"
#include "run/transfer.h"

/* The pinned blocks a plan holds while it finds them: the last one found,
 * checked first (leaves of one block come in runs), and the capacity. */
typedef struct pinned_finder {
  size_t capacity;
  size_t last; /* an index in plan->pinned (none while pinned_count is 0) */
} pinned_finder;

/* The live pinned block of the library's holding [address, address +
 * bytes), held by the plan (one reference and one use: busy from now on)
 * with `how` added to its entry; NULL when there is none. -1 in *failed
 * when out of memory. */
static mtc_block *hold_pinned(mtc_plan *plan, pinned_finder *f, uint64_t address,
                              uint64_t bytes, unsigned how, int *failed) {
  if (f->last < plan->pinned_count &&
      mtc_block_holds(plan->pinned[f->last], address, bytes)) {
    plan->pinned_how[f->last] |= (unsigned char)how;
    return plan->pinned[f->last];
  }
  mtc_block *block = mtc_block_find_pinned(address, bytes);
  if (block == NULL) return NULL;
  for (size_t k = 0; k < plan->pinned_count; k++) {
    if (plan->pinned[k] == block) {
      mtc_block_release(block); /* held already */
      plan->pinned_how[k] |= (unsigned char)how;
      f->last = k;
      return block;
    }
  }
  if (plan->pinned_count == f->capacity) {
    size_t grown = f->capacity ? f->capacity * 2 : 4;
    mtc_block **more = realloc(plan->pinned, grown * sizeof *more);
    if (more != NULL) plan->pinned = more;
    unsigned char *how_more = more ? realloc(plan->pinned_how, grown) : NULL;
    if (how_more == NULL) {
      mtc_block_release(block);
      *failed = -1;
      return NULL;
    }
    plan->pinned_how = how_more;
    f->capacity = grown;
  }
  mtc_block_use_begin(block);
  f->last = plan->pinned_count;
  plan->pinned_how[plan->pinned_count] = (unsigned char)how;
  plan->pinned[plan->pinned_count++] = block;
  plan->pinned_uses_open = 1;
  return block;
}

/* Every MTC_LEAF_PINNED host leaf and destination that lies in a pinned
 * block of the library's: the plan holds the block and marks it busy until
 * the copy is over, whatever the leaf's layout or direction. A contiguous
 * leaf of a copy to a device is read in place (its region in *regions,
 * which stays NULL when there is none); a destination of a device leaf is
 * written in place (direct_dst); the host reads or writes the rest itself
 * (MTC_PINNED_HOST). A leaf whose first byte lies in a block but not all of
 * it is staged, and marks that block. Empty leaves touch nothing. */
static mtc_status find_pinned(mtc_plan *plan, mtc_region **regions) {
  pinned_finder f = {0, 0};
  int failed = 0;
  int new_outputs = plan->destinations == NULL;
  for (uint64_t i = 0; i < plan->leaf_count && failed == 0; i++) {
    const mtc_leaf *leaf = &plan->leaves[i];
    if ((leaf->flags & MTC_LEAF_PINNED) && leaf->device == MTC_DEVICE_CPU &&
        leaf->bytes > 0) {
      int in_place = new_outputs && plan->target != MTC_DEVICE_CPU &&
                     leaf->row_count <= 1 && mtc_plan_leaf_strided(plan, i) == NULL;
      mtc_block *block =
          in_place ? hold_pinned(plan, &f, leaf->address, leaf->bytes, 0, &failed) : NULL;
      if (block == NULL && failed == 0) {
        in_place = 0;
        hold_pinned(plan, &f, leaf->address, 1, MTC_PINNED_HOST, &failed);
      }
      if (in_place) {
        if (*regions == NULL) *regions = calloc(plan->leaf_count, sizeof **regions);
        if (*regions == NULL) failed = -1;
        else {
          (*regions)[i].begin = block->address;
          (*regions)[i].end = block->address + block->bytes;
        }
      }
    }
    if (new_outputs || failed != 0) continue;
    const mtc_leaf *dst = &plan->destinations[i];
    if (!(dst->flags & MTC_LEAF_PINNED) || dst->device != MTC_DEVICE_CPU || dst->bytes == 0) {
      continue;
    }
    /* Host leaves go into host destinations by the copy-out, on the host. */
    int by_gpu = leaf->device != MTC_DEVICE_CPU && dst->row_count <= 1;
    mtc_block *block =
        by_gpu ? hold_pinned(plan, &f, dst->address, dst->bytes, 0, &failed) : NULL;
    if (block == NULL && failed == 0) {
      hold_pinned(plan, &f, dst->address, 1, MTC_PINNED_HOST, &failed);
    }
    if (block == NULL || failed != 0) continue;
    if (plan->direct_dst == NULL) plan->direct_dst = calloc(plan->leaf_count, 1);
    if (plan->direct_dst == NULL) failed = -1;
    else plan->direct_dst[i] = 1;
  }
  if (failed == 0) return MTC_OK;
  free(*regions);
  *regions = NULL;
  return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
}

uint64_t mtc_plan_chunk_limit(const mtc_options *options, size_t staging_max_bytes) {
  uint64_t limit = options->max_packed_chunk_bytes;
  return limit > staging_max_bytes ? staging_max_bytes : limit;
}

mtc_status mtc_plan_lay_out(const mtc_plan *plan, uint64_t chunk_limit,
                            const mtc_region *regions, mtc_layout *out) {
  mtc_options layout_options = plan->options;
  layout_options.max_packed_chunk_bytes = chunk_limit;
  mtc_status status =
      plan->destinations != NULL
          ? mtc_planner_layout_into(plan->leaves, (size_t)plan->leaf_count,
                                    &layout_options, out)
          : mtc_planner_layout(plan->leaves, (size_t)plan->leaf_count,
                               plan->target, &layout_options, regions, out);
  if (status != MTC_OK) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  return MTC_OK;
}

/* Lays the plan out and reserves room for everything the transfer records,
 * so that recording never fails half-way. Every pinned staging buffer the
 * copy takes fits a quarter of the pinned pool's limit: packed chunks are
 * cut to that size here, pieces and gather tables in run/. A plan made from
 * a prepared copy keeps the layout it came with where that is still the
 * one this would make: no leaf found to read in place, the same cut. */
static mtc_status prepare(mtc_plan *plan) {
  plan->staging_max_bytes = mtc_pinned_staging_max_bytes();
  uint64_t chunk_limit = mtc_plan_chunk_limit(&plan->options, plan->staging_max_bytes);
  mtc_region *regions = NULL;
  mtc_status status =
      plan->prepared.unpinned ? MTC_OK : find_pinned(plan, &regions);
  if (status != MTC_OK) return status;
  mtc_layout_counts counts = plan->prepared.counts;
  if (!plan->prepared.laid_out || regions != NULL ||
      plan->prepared.chunk_limit != chunk_limit) {
    mtc_layout_free(&plan->layout);
    plan->prepared.laid_out = 0;
    status = mtc_plan_lay_out(plan, chunk_limit, regions, &plan->layout);
    free(regions);
    if (status != MTC_OK) return status;
    mtc_layout_count(&plan->layout, plan->leaves, &counts);
  }
  size_t outputs = plan->layout.chunk_count + plan->layout.own_count;
  plan->results = calloc(plan->leaf_count ? plan->leaf_count : 1,
                         sizeof *plan->results);
  plan->blocks = calloc(outputs + 1, sizeof *plan->blocks);
  /* Staging: one buffer per output, the piece ring, and the segment tables
   * of gathered chunks: per source device, one per staging_max_bytes of
   * segments and one more (at most one source device per chunk). */
  size_t tables = plan->layout.chunk_count +
                  (size_t)(plan->leaf_count * sizeof(mtc_segment) / plan->staging_max_bytes);
  plan->staging = calloc(outputs + tables + MTC_PIECE_RING,
                         sizeof *plan->staging);
  if (!plan->results || !plan->blocks || !plan->staging) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }

  /* What the layout says about the copy; the submission adds the rest. */
  pthread_mutex_lock(&plan->lock);
  plan->stats.leaves_reused = counts.reused;
  plan->stats.leaves_packed = counts.packed;
  plan->stats.leaves_direct = counts.direct;
  plan->stats.chunks = plan->layout.chunk_count;
  plan->stats.bytes_copied = counts.bytes;
  pthread_mutex_unlock(&plan->lock);
  return MTC_OK;
}

/* Does the plan copy (not reuse) leaves that live on device, or write
 * destinations there? */
static int copies_from(const mtc_plan *plan, int32_t device) {
  if (plan->destinations != NULL && device == plan->target) return 1;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    mtc_placement_kind kind = plan->layout.placements[i].kind;
    if (plan->leaves[i].device == device &&
        (kind == MTC_PLACE_PACKED || kind == MTC_PLACE_OWN)) {
      return 1;
    }
  }
  return 0;
}

/* On the caller's thread, at submit: an event on each caller's stream whose
 * device holds leaves the plan copies, so that those copies read the leaves
 * only after the work the caller queued there so far. */
static mtc_status record_source_events(mtc_plan *plan) {
  if (plan->stream_count == 0) return MTC_OK;
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  for (size_t i = 0; status == MTC_OK && i < plan->stream_count; i++) {
    mtc_plan_stream *s = &plan->streams[i];
    if (!copies_from(plan, s->device->ordinal)) continue;
    status = mtc_context_scope_use(&scope, s->device);
    if (status != MTC_OK) break;
    CUevent event;
    status = mtc_device_event_acquire(s->device, &event);
    if (status != MTC_OK) break;
    CUresult r = cu->cuEventRecord(event, s->stream);
    if (r != CUDA_SUCCESS) {
      mtc_device_event_release(s->device, event);
      char what[96];
      mtc_format(what, sizeof what,
                 "cuEventRecord on the stream set for cuda:%d (0x%llx)",
                 s->device->ordinal,
                 (unsigned long long)(uintptr_t)s->stream);
      status = mtc_cuda_fail(r, what);
      break;
    }
    s->ready = event;
  }
  mtc_context_scope_end(&scope);
  return status;
}

/* Keeps the submission's counters (lock held). */
static void merge_stats_locked(mtc_plan *plan, const mtc_plan_stats *from) {
  plan->stats.device_to_host_path = from->device_to_host_path;
  plan->stats.blocks = from->blocks;
  plan->stats.copies_issued = from->copies_issued;
  plan->stats.pinned_reuses = from->pinned_reuses;
  plan->stats.pinned_allocations = from->pinned_allocations;
  plan->stats.staging_ns = from->staging_ns;
  plan->stats.submit_ns = from->submit_ns;
  plan->stats.bytes_staged = from->bytes_staged;
  if (plan->destinations != NULL) plan->stats.leaves_direct = from->leaves_direct;
}

/* Ends the SUBMITTING phase with the transfer's outcome. */
static void finish_submission(mtc_plan *plan, mtc_status status,
                              int64_t failed_leaf,
                              const mtc_plan_stats *stats) {
  /* The pinned blocks it reads or writes in place are busy until its
   * completion event (none after a failure: it waited for its work). */
  mtc_plan_end_pinned_uses(plan, status == MTC_OK ? plan->completion : NULL);
  pthread_mutex_lock(&plan->lock);
  merge_stats_locked(plan, stats);
  if (status != MTC_OK) {
    mtc_plan_record_error_locked(plan, failed_leaf);
    plan->status = status;
    plan->phase = MTC_PHASE_FAILED;
  } else if (plan->completion == NULL) {
    /* Nothing asynchronous (host-only copies): done already. */
    mtc_transfer_return_staging(plan);
    plan->phase = MTC_PHASE_DONE;
  } else {
    plan->phase = MTC_PHASE_IN_FLIGHT;
    mtc_in_flight_add_locked(plan);
  }
  atomic_store_explicit(&plan->submission_over, 1, memory_order_release);
  pthread_cond_broadcast(&plan->submitted);
  /* After this unlock a waiter may release the plan: touch nothing. */
  pthread_mutex_unlock(&plan->lock);
}

static void run_in_background(mtc_background_item *item) {
  mtc_plan *plan =
      (mtc_plan *)((char *)item - offsetof(mtc_plan, background));
  mtc_plan_stats stats;
  memset(&stats, 0, sizeof stats);
  int64_t failed_leaf;
  mtc_status status = mtc_transfer_run(plan, &stats, &failed_leaf);
  finish_submission(plan, status, failed_leaf, &stats);
}

MTC_API mtc_status mtc_plan_submit(mtc_plan *plan) {
  uint64_t start = mtc_clock_ns();
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "the plan was already submitted"),
                     -1);
  }
  /* What a prepared copy checked for this plan already is not checked again. */
  mtc_status status = plan->prepared.devices_checked
                          ? MTC_OK
                          : mtc_plan_check_leaf_devices(plan);
  if (status == MTC_OK && !plan->prepared.apart) {
    status = mtc_plan_check_destinations(plan);
  }
  if (status != MTC_OK) return status;
  status = prepare(plan);
  if (status != MTC_OK) return mtc_plan_fail_submit(plan, status, -1);
  status = record_source_events(plan);
  if (status != MTC_OK) return mtc_plan_fail_submit(plan, status, -1);

  plan->submit_start_ns = start;
  /* MTC_TRACE_FILE: the checks and the layout, on the submitting thread. */
  mtc_trace_file_span("plan", "plan", plan->leaf_count, 0, start);
  pthread_mutex_lock(&plan->lock);
  plan->phase = MTC_PHASE_SUBMITTING;
  pthread_mutex_unlock(&plan->lock);
  /* With a stream of the caller's on the target, the stream must wait on
   * the copy before submit returns (the caller queues work on it next), so
   * the copy is enqueued here. */
  if (plan->options.use_background_thread &&
      mtc_plan_target_stream(plan) == NULL) {
    plan->background.run = run_in_background;
    if (mtc_background_enqueue(&plan->background) == 0) return MTC_OK;
    /* No background thread could be started: do the work here. */
  }
  /* Submission order holds across both paths: plans still queued for the
   * background thread go first (two copies into one destination land in
   * the order they were submitted). */
  mtc_background_drain();
  mtc_plan_stats stats;
  memset(&stats, 0, sizeof stats);
  int64_t failed_leaf;
  status = mtc_transfer_run(plan, &stats, &failed_leaf);
  finish_submission(plan, status, failed_leaf, &stats);
  return status == MTC_OK ? MTC_OK : mtc_plan_report(plan, status);
}
