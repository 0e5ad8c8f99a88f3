/* plan.c — the plan life cycle of mtc.h: create, add (with validation),
 * submit, poll/wait, results, release. The phase is guarded by plan->lock
 * because poll, wait and release may run while the background thread is
 * still submitting, and two threads may wait on one plan at once. */
#include "plan.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "options.h"
#include "transfer.h"

static atomic_uint_fast64_t plans_live;

uint64_t mtc_plan_live_count(void) { return atomic_load(&plans_live); }

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
  plan->staging = calloc(outputs + MTC_PIECE_RING, sizeof *plan->staging);
  plan->held_events = calloc(MTC_PIECE_RING, sizeof *plan->held_events);
  if (!plan->results || !plan->blocks || !plan->staging || !plan->held_events) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  return MTC_OK;
}

/* Ends the SUBMITTING phase with the transfer's outcome. */
static void finish_submission(mtc_plan *plan, mtc_status status) {
  pthread_mutex_lock(&plan->lock);
  if (status != MTC_OK) {
    record_error_locked(plan, -1);
    plan->status = status;
    plan->phase = MTC_PHASE_FAILED;
  } else if (plan->event_count == 0) {
    /* Nothing asynchronous (host-only copies): done already. */
    mtc_transfer_return_staging(plan);
    plan->phase = MTC_PHASE_DONE;
  } else {
    plan->phase = MTC_PHASE_IN_FLIGHT;
  }
  pthread_cond_broadcast(&plan->submitted);
  /* After this unlock a waiter may release the plan: touch nothing. */
  pthread_mutex_unlock(&plan->lock);
}

static void run_in_background(mtc_background_item *item) {
  mtc_plan *plan =
      (mtc_plan *)((char *)item - offsetof(mtc_plan, background));
  finish_submission(plan, mtc_transfer_run(plan));
}

MTC_API mtc_status mtc_plan_submit(mtc_plan *plan) {
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

  pthread_mutex_lock(&plan->lock);
  plan->phase = MTC_PHASE_SUBMITTING;
  pthread_mutex_unlock(&plan->lock);
  if (plan->options.use_background_thread) {
    plan->background.run = run_in_background;
    if (mtc_background_enqueue(&plan->background) == 0) return MTC_OK;
    /* No background thread could be started: do the work here. */
  }
  status = mtc_transfer_run(plan);
  finish_submission(plan, status);
  return status == MTC_OK ? MTC_OK : plan_report(plan, status);
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
    const mtc_cuda_api *cu;
    status = mtc_cuda_load(&cu);
    int pending = 0;
    for (size_t i = 0; status == MTC_OK && i < plan->event_count; i++) {
      mtc_plan_event *e = &plan->events[i];
      if (e->complete) continue;
      CUresult r = cu->cuEventQuery(e->event);
      if (r == CUDA_SUCCESS) {
        e->complete = 1;
      } else if (r == CUDA_ERROR_NOT_READY) {
        pending = 1;
        break;
      } else {
        fail_locked(plan, r, "cuEventQuery");
        break;
      }
    }
    if (status == MTC_OK && !pending) complete_locked(plan);
    if (status == MTC_OK) status = settled_status_locked(plan);
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
  while (plan->phase == MTC_PHASE_SUBMITTING) {
    pthread_cond_wait(&plan->submitted, &plan->lock);
  }
  if (plan->phase == MTC_PHASE_IN_FLIGHT) {
    /* The event list is fixed once in flight and freed only by release, so
     * it can be read without the lock; syncing without it keeps poll from
     * blocking. */
    mtc_plan_event *events = plan->events;
    size_t count = plan->event_count;
    pthread_mutex_unlock(&plan->lock);
    const mtc_cuda_api *cu;
    CUresult failure = CUDA_SUCCESS;
    if (mtc_cuda_load(&cu) == MTC_OK) {
      for (size_t i = 0; i < count && failure == CUDA_SUCCESS; i++) {
        failure = cu->cuEventSynchronize(events[i].event);
      }
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
  for (size_t i = 0; i < plan->event_count; i++) {
    mtc_device_event_release(plan->events[i].device, plan->events[i].event);
  }
  for (size_t i = 0; i < plan->held_count; i++) {
    mtc_device_event_release(plan->held_events[i].device,
                             plan->held_events[i].event);
  }
  mtc_layout_free(&plan->layout);
  free(plan->leaves);
  free(plan->results);
  free(plan->blocks);
  free(plan->staging);
  free(plan->events);
  free(plan->held_events);
  pthread_cond_destroy(&plan->submitted);
  pthread_mutex_destroy(&plan->lock);
  free(plan);
  atomic_fetch_sub(&plans_live, 1);
}
