/* plan.c — the plan life cycle of mtc.h: create, add (with validation),
 * submit, poll/wait, results, release. The phase is guarded by plan->lock
 * because poll, wait and release may run while the background thread is
 * still submitting, and two threads may wait on one plan at once. */
#include "plan.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_driver.h"
#include "options.h"
#include "spin.h"
#include "transfer.h"

static atomic_uint_fast64_t plans_live;

uint64_t mtc_plan_live_count(void) { return atomic_load(&plans_live); }

uint64_t mtc_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

CUstream mtc_plan_target_stream(const mtc_plan *plan) {
  for (size_t i = 0; i < plan->stream_count; i++) {
    if (plan->streams[i].device->ordinal == plan->target) {
      return plan->streams[i].stream;
    }
  }
  return NULL;
}

/* Records the thread's last error as the plan's error too; lock held (the
 * background thread may record the copy's own failure at the same time). */
static void record_error_locked(mtc_plan *plan, int64_t leaf) {
  mtc_format(plan->error, sizeof plan->error, "%s", mtc_error_text());
  plan->error_leaf = leaf;
}

static mtc_status plan_fail(mtc_plan *plan, mtc_status status, int64_t leaf) {
  pthread_mutex_lock(&plan->lock);
  record_error_locked(plan, leaf);
  pthread_mutex_unlock(&plan->lock);
  return status;
}

static mtc_plan_phase phase_of(mtc_plan *plan) {
  pthread_mutex_lock(&plan->lock);
  mtc_plan_phase phase = plan->phase;
  pthread_mutex_unlock(&plan->lock);
  return phase;
}

/* A submit that failed before any copy started ends the plan. */
static mtc_status fail_submit(mtc_plan *plan, mtc_status status,
                              int64_t leaf) {
  pthread_mutex_lock(&plan->lock);
  record_error_locked(plan, leaf);
  plan->status = status;
  plan->phase = MTC_PHASE_FAILED;
  pthread_mutex_unlock(&plan->lock);
  return status;
}

/* Hands the plan's stored error to the calling thread's last error. */
static mtc_status plan_report(const mtc_plan *plan, mtc_status status) {
  return mtc_error_set_text(status, plan->error);
}

MTC_API mtc_status mtc_plan_create(int32_t target_device,
                                   const mtc_options *options,
                                   mtc_plan **out_plan) {
  if (out_plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_create: out_plan must not be NULL");
  }
  *out_plan = NULL;
  mtc_options normalized;
  mtc_status status = mtc_options_normalize(options, &normalized);
  if (status != MTC_OK) return status;
  if (target_device < MTC_DEVICE_CPU) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "target device %d is neither MTC_DEVICE_CPU (-1) nor "
                         "a CUDA ordinal",
                         target_device);
  }
  if (target_device >= 0) {
    /* Fail early (no driver, no such device) and set the device up now
     * rather than in the middle of the first copy. */
    mtc_device *device;
    status = mtc_device_get(target_device, &device);
    if (status != MTC_OK) return status;
  }

  mtc_plan *plan = calloc(1, sizeof *plan);
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  plan->target = target_device;
  plan->options = normalized;
  plan->phase = MTC_PHASE_BUILDING;
  plan->status = MTC_OK;
  plan->error_leaf = -1;
  plan->stats.struct_size = sizeof plan->stats;
  pthread_mutex_init(&plan->lock, NULL);
  pthread_cond_init(&plan->submitted, NULL);
  atomic_fetch_add(&plans_live, 1);
  *out_plan = plan;
  return MTC_OK;
}

/* Checks one leaf; index is its index in the plan. */
static mtc_status check_leaf(const mtc_leaf *leaf, uint64_t index) {
  unsigned long long i = (unsigned long long)index;
  if (leaf->address == 0 && leaf->bytes > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: address is 0 but bytes is %llu", i,
                         (unsigned long long)leaf->bytes);
  }
  switch (leaf->element_size) {
    case 1: case 2: case 4: case 8: case 16:
      break;
    default:
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: element_size is %u; it must be 1, 2, "
                           "4, 8 or 16",
                           i, leaf->element_size);
  }
  if (leaf->device < MTC_DEVICE_CPU) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: device %d is neither MTC_DEVICE_CPU (-1) "
                         "nor a CUDA ordinal",
                         i, leaf->device);
  }
  uint64_t extent = leaf->bytes; /* bytes the source spans */
  if (leaf->row_count > 1) {
    if (leaf->device != MTC_DEVICE_CPU) {
      return mtc_error_set(MTC_ERR_UNSUPPORTED,
                           "leaf %llu: strided (row_count > 1) leaves must be "
                           "in host memory; cuda:%d leaves must be contiguous",
                           i, leaf->device);
    }
    if (leaf->bytes % leaf->row_count != 0) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: bytes %llu is not a multiple of "
                           "row_count %u",
                           i, (unsigned long long)leaf->bytes, leaf->row_count);
    }
    uint64_t row_bytes = leaf->bytes / leaf->row_count;
    if (leaf->row_pitch < row_bytes) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: row_pitch %llu is less than the row "
                           "size %llu (bytes / row_count): rows would overlap",
                           i, (unsigned long long)leaf->row_pitch,
                           (unsigned long long)row_bytes);
    }
    uint64_t rows_before_last = leaf->row_count - 1;
    if (leaf->row_pitch > (UINT64_MAX - row_bytes) / rows_before_last) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: row_pitch %llu times row_count %u "
                           "overflows the address space",
                           i, (unsigned long long)leaf->row_pitch,
                           leaf->row_count);
    }
    extent = leaf->row_pitch * rows_before_last + row_bytes;
  }
  if (leaf->address > UINT64_MAX - extent) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: address + size overflows the address "
                         "space",
                         i);
  }
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_add_leaves(mtc_plan *plan, const mtc_leaf *leaves,
                                       uint64_t count) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (leaves == NULL && count > 0) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "leaves must not be NULL"),
                     -1);
  }
  if (phase_of(plan) != MTC_PHASE_BUILDING) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "leaves can only be added before submit"),
                     -1);
  }
  for (uint64_t i = 0; i < count; i++) {
    mtc_status status = check_leaf(&leaves[i], plan->leaf_count + i);
    if (status != MTC_OK) {
      return plan_fail(plan, status, (int64_t)(plan->leaf_count + i));
    }
  }
  if (count > UINT64_MAX / 2 / sizeof(mtc_leaf) - plan->leaf_count) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "too many leaves"),
                     -1);
  }
  uint64_t needed = plan->leaf_count + count;
  if (needed > plan->leaf_capacity) {
    uint64_t grown = plan->leaf_capacity ? plan->leaf_capacity * 2 : 64;
    if (grown < needed) grown = needed;
    mtc_leaf *more = realloc(plan->leaves, (size_t)grown * sizeof *more);
    if (more == NULL) {
      return plan_fail(plan,
                       mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                     "out of host memory for %llu leaves",
                                     (unsigned long long)needed),
                       -1);
    }
    plan->leaves = more;
    plan->leaf_capacity = grown;
  }
  if (count > 0) {
    memcpy(plan->leaves + plan->leaf_count, leaves,
           (size_t)count * sizeof *leaves);
  }
  plan->leaf_count = needed;
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_add_leaf(mtc_plan *plan, const mtc_leaf *leaf,
                                     uint64_t *out_index) {
  if (plan != NULL && leaf == NULL) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "leaf must not be NULL"),
                     -1);
  }
  uint64_t index = plan ? plan->leaf_count : 0;
  mtc_status status = mtc_plan_add_leaves(plan, leaf, 1);
  if (status == MTC_OK && out_index != NULL) *out_index = index;
  return status;
}

MTC_API mtc_status mtc_leaves_set_addresses(mtc_leaf *leaves, uint64_t first,
                                            uint32_t count, const void *view0,
                                            const void *view1, const void *view2,
                                            const void *view3, const void *view4,
                                            const void *view5, const void *view6,
                                            const void *view7) {
  const void *views[8] = {view0, view1, view2, view3,
                          view4, view5, view6, view7};
  if (count > 8) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "count is %u; at most 8 views per call", count);
  }
  if (leaves == NULL && count > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "leaves must not be NULL");
  }
  for (uint32_t k = 0; k < count; k++) {
    mtc_leaf *leaf = &leaves[first + k];
    if (views[k] != NULL && leaf->bytes != 0) {
      leaf->address = (uint64_t)(uintptr_t)views[k];
    }
  }
  return MTC_OK;
}

MTC_API uint64_t mtc_plan_leaf_count(const mtc_plan *plan) {
  return plan ? plan->leaf_count : 0;
}

/* Every CUDA leaf must name a device this machine has. */
static mtc_status check_leaf_devices(mtc_plan *plan) {
  int device_count = -1;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    int32_t device = plan->leaves[i].device;
    if (device == MTC_DEVICE_CPU) continue;
    if (device_count < 0) {
      mtc_status status = mtc_cuda_device_count_internal(&device_count);
      if (status != MTC_OK) {
        char why[MTC_ERROR_CAPACITY];
        mtc_format(why, sizeof why, "%s", mtc_error_text());
        mtc_error_set(status, "leaf %llu: on cuda:%d, but %s",
                      (unsigned long long)i, device, why);
        return fail_submit(plan, status, (int64_t)i);
      }
    }
    if (device >= device_count) {
      return fail_submit(plan,
                       mtc_error_set(MTC_ERR_NO_DEVICE,
                                     "leaf %llu: cuda:%d requested but this "
                                     "machine has %d CUDA device%s",
                                     (unsigned long long)i, device,
                                     device_count,
                                     device_count == 1 ? "" : "s"),
                       (int64_t)i);
    }
  }
  return MTC_OK;
}

/* Lays the plan out and reserves room for everything the transfer records,
 * so that recording never fails half-way. */
static mtc_status prepare(mtc_plan *plan) {
  mtc_status status = mtc_planner_layout(plan->leaves, (size_t)plan->leaf_count,
                                         plan->target, &plan->options,
                                         &plan->layout);
  if (status != MTC_OK) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  size_t outputs = plan->layout.chunk_count + plan->layout.own_count;
  plan->results = calloc(plan->leaf_count ? plan->leaf_count : 1,
                         sizeof *plan->results);
  plan->blocks = calloc(outputs + 1, sizeof *plan->blocks);
  /* Staging: one buffer per output, the piece ring, and one segment table
   * per source device of gathered chunks (at most one per chunk). */
  plan->staging = calloc(outputs + plan->layout.chunk_count + MTC_PIECE_RING,
                         sizeof *plan->staging);
  if (!plan->results || !plan->blocks || !plan->staging) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }

  /* What the layout says about the copy; the submission adds the rest. */
  uint64_t reused = 0, packed = 0, bytes = 0;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    switch (plan->layout.placements[i].kind) {
      case MTC_PLACE_REUSED:
        reused++;
        break;
      case MTC_PLACE_PACKED:
        packed++;
        bytes += plan->leaves[i].bytes;
        break;
      case MTC_PLACE_OWN:
        bytes += plan->leaves[i].bytes;
        break;
      case MTC_PLACE_ZERO:
        break;
    }
  }
  pthread_mutex_lock(&plan->lock);
  plan->stats.leaves_reused = reused;
  plan->stats.leaves_packed = packed;
  plan->stats.chunks = plan->layout.chunk_count;
  plan->stats.bytes_copied = bytes;
  pthread_mutex_unlock(&plan->lock);
  return MTC_OK;
}

/* Does the plan copy (not reuse) leaves that live on device? */
static int copies_from(const mtc_plan *plan, int32_t device) {
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
}

/* Ends the SUBMITTING phase with the transfer's outcome. */
static void finish_submission(mtc_plan *plan, mtc_status status,
                              int64_t failed_leaf,
                              const mtc_plan_stats *stats) {
  pthread_mutex_lock(&plan->lock);
  merge_stats_locked(plan, stats);
  if (status != MTC_OK) {
    record_error_locked(plan, failed_leaf);
    plan->status = status;
    plan->phase = MTC_PHASE_FAILED;
  } else if (plan->completion == NULL) {
    /* Nothing asynchronous (host-only copies): done already. */
    mtc_transfer_return_staging(plan);
    plan->phase = MTC_PHASE_DONE;
  } else {
    plan->phase = MTC_PHASE_IN_FLIGHT;
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
  if (phase_of(plan) != MTC_PHASE_BUILDING) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "the plan was already submitted"),
                     -1);
  }
  mtc_status status = check_leaf_devices(plan);
  if (status != MTC_OK) return status;
  status = prepare(plan);
  if (status != MTC_OK) return fail_submit(plan, status, -1);
  status = record_source_events(plan);
  if (status != MTC_OK) return fail_submit(plan, status, -1);

  plan->submit_start_ns = start;
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
  mtc_plan_stats stats;
  memset(&stats, 0, sizeof stats);
  int64_t failed_leaf;
  status = mtc_transfer_run(plan, &stats, &failed_leaf);
  finish_submission(plan, status, failed_leaf, &stats);
  return status == MTC_OK ? MTC_OK : plan_report(plan, status);
}

mtc_status mtc_plan_read_begin(mtc_plan *plan) {
  atomic_store(&plan->reading, 1);
  if (atomic_load(&plan->stop_reading)) {
    atomic_store(&plan->reading, 0);
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "the copy stopped reading host memory before it "
                         "was staged (mtc_plan_stop_reading: the runtime is "
                         "freeing that memory, as at exit)");
  }
  return MTC_OK;
}

void mtc_plan_read_end(mtc_plan *plan) { atomic_store(&plan->reading, 0); }

MTC_API mtc_status mtc_plan_stop_reading(mtc_plan *plan, uint32_t timeout_ms) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  atomic_store(&plan->stop_reading, 1);
  uint64_t deadline = mtc_clock_ns() + (uint64_t)timeout_ms * 1000000u;
  /* Reads are memcpys and driver calls: short, so a poll is enough. */
  while (atomic_load(&plan->reading)) {
    if (mtc_clock_ns() >= deadline) {
      return mtc_error_set(MTC_IN_PROGRESS,
                           "mtc_plan_stop_reading: a read of host memory "
                           "was still in progress after %u ms", timeout_ms);
    }
    struct timespec pause = {0, 50 * 1000};
    nanosleep(&pause, NULL);
  }
  return MTC_OK;
}

/* All events complete: hand staging back at once so that the next copy can
 * reuse it. Called with the lock held. */
static void complete_locked(mtc_plan *plan) {
  if (plan->phase != MTC_PHASE_IN_FLIGHT) return;
  mtc_transfer_return_staging(plan);
  plan->phase = MTC_PHASE_DONE;
}

static void fail_locked(mtc_plan *plan, CUresult result, const char *what) {
  if (plan->phase != MTC_PHASE_IN_FLIGHT) return;
  plan->status = mtc_cuda_fail(result, what);
  record_error_locked(plan, -1);
  plan->phase = MTC_PHASE_FAILED;
}

/* Status for a plan whose phase is settled; lock held. */
static mtc_status settled_status_locked(const mtc_plan *plan) {
  switch (plan->phase) {
    case MTC_PHASE_DONE:
      return MTC_OK;
    case MTC_PHASE_FAILED:
      return plan_report(plan, plan->status);
    default:
      return MTC_IN_PROGRESS;
  }
}

MTC_API mtc_status mtc_plan_poll(mtc_plan *plan) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  mtc_status status;
  if (plan->phase == MTC_PHASE_BUILDING) {
    status = mtc_error_set(MTC_ERR_INVALID_STATE, "the plan was not submitted");
    record_error_locked(plan, -1);
  } else if (plan->phase == MTC_PHASE_IN_FLIGHT) {
    /* The completion event follows all of the copy's device work, and
     * nothing else: never the caller's own streams. */
    const mtc_cuda_api *cu;
    status = mtc_cuda_load(&cu);
    if (status == MTC_OK) {
      CUresult r = cu->cuEventQuery(plan->completion->event);
      if (r == CUDA_SUCCESS) {
        complete_locked(plan);
      } else if (r != CUDA_ERROR_NOT_READY) {
        fail_locked(plan, r, "cuEventQuery");
      }
      status = settled_status_locked(plan);
    }
  } else {
    status = settled_status_locked(plan);
  }
  pthread_mutex_unlock(&plan->lock);
  return status;
}

MTC_API mtc_status mtc_plan_wait(mtc_plan *plan) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  if (plan->phase == MTC_PHASE_BUILDING) {
    mtc_error_set(MTC_ERR_INVALID_STATE, "the plan was not submitted");
    record_error_locked(plan, -1);
    pthread_mutex_unlock(&plan->lock);
    return MTC_ERR_INVALID_STATE;
  }
  if (plan->phase == MTC_PHASE_SUBMITTING) {
    /* A small copy is submitted within tens of µs: spin that long before
     * sleeping, since waking a sleeping thread costs as much again. */
    pthread_mutex_unlock(&plan->lock);
    uint64_t spin_until = mtc_clock_ns() + mtc_spin_ns();
    while (!atomic_load_explicit(&plan->submission_over, memory_order_acquire) &&
           mtc_clock_ns() < spin_until) {
      mtc_cpu_relax();
    }
    pthread_mutex_lock(&plan->lock);
  }
  while (plan->phase == MTC_PHASE_SUBMITTING) {
    pthread_cond_wait(&plan->submitted, &plan->lock);
  }
  if (plan->phase == MTC_PHASE_IN_FLIGHT) {
    /* The completion event is fixed once in flight and freed only by
     * release, so it can be read without the lock; syncing without it keeps
     * poll from blocking. */
    CUevent completion = plan->completion->event;
    pthread_mutex_unlock(&plan->lock);
    const mtc_cuda_api *cu;
    CUresult failure = CUDA_SUCCESS;
    if (mtc_cuda_load(&cu) == MTC_OK) {
      failure = cu->cuEventSynchronize(completion);
    }
    pthread_mutex_lock(&plan->lock);
    if (failure != CUDA_SUCCESS) {
      fail_locked(plan, failure, "cuEventSynchronize");
    } else {
      complete_locked(plan);
    }
  }
  mtc_status status = settled_status_locked(plan);
  pthread_mutex_unlock(&plan->lock);
  return status;
}

MTC_API mtc_status mtc_plan_results(mtc_plan *plan, uint64_t first,
                                    uint64_t count, mtc_leaf_result *out) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  mtc_plan_phase phase = plan->phase;
  pthread_mutex_unlock(&plan->lock);
  if (phase == MTC_PHASE_FAILED) {
    /* Keep the copy's own error as the plan's message. */
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "the copy failed, so it has no results: %s",
                         mtc_plan_last_error(plan));
  }
  if (phase != MTC_PHASE_DONE) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "results are readable only after poll or "
                                   "wait returned MTC_OK"),
                     -1);
  }
  if (first > plan->leaf_count || count > plan->leaf_count - first) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "results [%llu, %llu + %llu) are outside "
                                   "the plan's %llu leaves",
                                   (unsigned long long)first,
                                   (unsigned long long)first,
                                   (unsigned long long)count,
                                   (unsigned long long)plan->leaf_count),
                     -1);
  }
  if (out == NULL && count > 0) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "out must not be NULL"),
                     -1);
  }
  if (count > 0) {
    memcpy(out, plan->results + first, (size_t)count * sizeof *out);
  }
  return MTC_OK;
}

MTC_API const char *mtc_plan_last_error(const mtc_plan *plan) {
  return plan ? plan->error : "";
}

MTC_API int64_t mtc_plan_error_leaf(const mtc_plan *plan) {
  return plan ? plan->error_leaf : -1;
}

MTC_API void mtc_plan_release(mtc_plan *plan) {
  if (plan == NULL) return;
  if (phase_of(plan) != MTC_PHASE_BUILDING) {
    /* Copies in flight still read staging and write blocks. */
    mtc_plan_wait(plan);
  }
  mtc_transfer_return_staging(plan);
  for (size_t i = 0; i < plan->block_count; i++) {
    mtc_block_release(plan->blocks[i]);
  }
  mtc_event_release(plan->completion);
  for (size_t i = 0; i < plan->held_count; i++) {
    mtc_device_event_release(plan->held_events[i].device,
                             plan->held_events[i].event);
  }
  for (size_t i = 0; i < plan->stream_count; i++) {
    mtc_device_event_release(plan->streams[i].device,
                             plan->streams[i].ready);
  }
  mtc_layout_free(&plan->layout);
  free(plan->leaves);
  free(plan->streams);
  free(plan->results);
  free(plan->blocks);
  free(plan->staging);
  free(plan->held_events);
  pthread_cond_destroy(&plan->submitted);
  pthread_mutex_destroy(&plan->lock);
  free(plan);
  atomic_fetch_sub(&plans_live, 1);
}

MTC_API mtc_status mtc_plan_set_stream(mtc_plan *plan, int32_t device,
                                       uint64_t stream) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (phase_of(plan) != MTC_PHASE_BUILDING) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "mtc_plan_set_stream: streams can only be "
                                   "set before submit"),
                     -1);
  }
  if (device < 0) {
    return plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "mtc_plan_set_stream: device %d is not a "
                                   "CUDA ordinal (streams belong to CUDA "
                                   "devices)",
                                   device),
                     -1);
  }
  mtc_device *d;
  mtc_status status = mtc_device_get(device, &d);
  if (status != MTC_OK) return plan_fail(plan, status, -1);

  size_t i = 0;
  while (i < plan->stream_count && plan->streams[i].device != d) i++;
  if (stream == 0) {
    /* 0 takes the device's stream back out. */
    if (i < plan->stream_count) {
      plan->streams[i] = plan->streams[--plan->stream_count];
    }
    return MTC_OK;
  }
  if (i == plan->stream_count) {
    mtc_plan_stream *more =
        realloc(plan->streams, (plan->stream_count + 1) * sizeof *more);
    if (more == NULL) {
      return plan_fail(plan,
                       mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                     "out of host memory"),
                       -1);
    }
    plan->streams = more;
    plan->stream_count++;
  }
  plan->streams[i].device = d;
  plan->streams[i].stream = (CUstream)(uintptr_t)stream;
  plan->streams[i].ready = NULL;
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_completion_event(mtc_plan *plan,
                                             mtc_event **out_event) {
  if (plan == NULL || out_event == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_completion_event: plan and out_event must "
                         "not be NULL");
  }
  *out_event = NULL;
  pthread_mutex_lock(&plan->lock);
  if (plan->phase == MTC_PHASE_BUILDING) {
    mtc_error_set(MTC_ERR_INVALID_STATE,
                  "mtc_plan_completion_event: the plan was not submitted");
    record_error_locked(plan, -1);
    pthread_mutex_unlock(&plan->lock);
    return MTC_ERR_INVALID_STATE;
  }
  /* The event exists once the copy is enqueued: a background submission
   * is waited for (staging takes a while; the copy itself is not). */
  while (plan->phase == MTC_PHASE_SUBMITTING) {
    pthread_cond_wait(&plan->submitted, &plan->lock);
  }
  mtc_status status = MTC_OK;
  if (plan->phase == MTC_PHASE_FAILED) {
    status = plan_report(plan, plan->status);
  } else if (plan->completion != NULL) {
    mtc_event_retain(plan->completion);
    *out_event = plan->completion;
  }
  pthread_mutex_unlock(&plan->lock);
  return status;
}

MTC_API mtc_status mtc_plan_get_stats(const mtc_plan *plan,
                                      mtc_plan_stats *out) {
  if (plan == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: plan and out must not be NULL");
  }
  if (out->struct_size < sizeof(mtc_plan_stats)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_get_stats: out->struct_size is %u, needs "
                         "at least %zu",
                         out->struct_size, sizeof(mtc_plan_stats));
  }
  /* The lock guards the stats only; the plan itself is not changed. */
  mtc_plan *p = (mtc_plan *)plan;
  pthread_mutex_lock(&p->lock);
  *out = p->stats;
  pthread_mutex_unlock(&p->lock);
  out->struct_size = sizeof *out;
  out->leaves = plan->leaf_count;
  return MTC_OK;
}
