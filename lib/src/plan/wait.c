/* wait.c — learning that a submitted plan is done: poll, wait, and the
 * completion event other GPU work can wait on. A plan is done when its one
 * completion event has completed; its staging then goes back to the pools
 * (run/plan_state.c). A copy into host destinations is written into them
 * here, by the caller's poll or wait, and nowhere else. */
#include "base/clock.h"
#include "base/spin.h"
#include "cuda/driver.h"
#include "plan/phase.h"
#include "run/copy_out.h"
#include "run/trace_file.h"
#include "run/transfer.h"

/* A completed copy into host destinations: writes them now, on the calling
 * thread (the caller's poll or wait, so the caller knows the moment). Lock
 * held. */
static void land_host_destinations_locked(mtc_plan *plan) {
  if (plan->phase != MTC_PHASE_DONE || plan->copy_out_count == 0) return;
  mtc_status status = mtc_plan_copy_out(plan);
  if (status != MTC_OK) {
    plan->status = status;
    mtc_plan_record_error_locked(plan, -1);
    plan->phase = MTC_PHASE_FAILED;
  }
}

/* Status for a plan whose phase is settled; lock held. */
static mtc_status settled_status_locked(const mtc_plan *plan) {
  switch (plan->phase) {
    case MTC_PHASE_DONE:
      return MTC_OK;
    case MTC_PHASE_FAILED:
      return mtc_plan_report(plan, plan->status);
    default:
      return MTC_IN_PROGRESS;
  }
}

/* Poll, writing host destinations when `land` is set. */
static mtc_status poll(mtc_plan *plan, int land) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  mtc_status status;
  if (plan->phase == MTC_PHASE_BUILDING) {
    status = mtc_error_set(MTC_ERR_INVALID_STATE, "the plan was not submitted");
    mtc_plan_record_error_locked(plan, -1);
  } else if (plan->phase == MTC_PHASE_IN_FLIGHT) {
    /* The completion event follows all of the copy's device work, and
     * nothing else: never the caller's own streams. */
    const mtc_cuda_api *cu;
    status = mtc_cuda_load(&cu);
    if (status == MTC_OK) {
      CUresult r = cu->cuEventQuery(plan->completion->event);
      if (r == CUDA_SUCCESS) {
        mtc_plan_complete_locked(plan);
      } else if (r != CUDA_ERROR_NOT_READY) {
        mtc_plan_fail_locked(plan, r, "cuEventQuery");
      }
      if (land) land_host_destinations_locked(plan);
      status = settled_status_locked(plan);
    }
  } else {
    if (land) land_host_destinations_locked(plan);
    status = settled_status_locked(plan);
  }
  pthread_mutex_unlock(&plan->lock);
  return status;
}

MTC_API mtc_status mtc_plan_poll(mtc_plan *plan) { return poll(plan, 1); }

MTC_API mtc_status mtc_plan_poll_device(mtc_plan *plan) { return poll(plan, 0); }

/* A wait that lets go of the lock counts itself in, so that a release on
 * another thread waits for it to leave (plan_state.h). Lock held. */
static void waiter_enter_locked(mtc_plan *plan) { plan->waiters++; }

static void waiter_leave_locked(mtc_plan *plan) {
  if (--plan->waiters == 0) pthread_cond_broadcast(&plan->waiters_left);
}

/* Waits until the copy's device work is over; returns with the lock held
 * and the caller counted as a waiter (waiter_leave_locked before unlocking). */
static mtc_status wait_device_locked(mtc_plan *plan) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  if (plan->phase == MTC_PHASE_BUILDING) {
    mtc_error_set(MTC_ERR_INVALID_STATE, "the plan was not submitted");
    mtc_plan_record_error_locked(plan, -1);
    pthread_mutex_unlock(&plan->lock);
    return MTC_ERR_INVALID_STATE;
  }
  waiter_enter_locked(plan);
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
      mtc_plan_fail_locked(plan, failure, "cuEventSynchronize");
    } else {
      mtc_plan_complete_locked(plan);
    }
  }
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_wait(mtc_plan *plan) {
  uint64_t begin = mtc_trace_file_now();
  mtc_status status = wait_device_locked(plan);
  if (status != MTC_OK) return status;
  land_host_destinations_locked(plan);
  status = settled_status_locked(plan);
  waiter_leave_locked(plan);
  uint64_t leaves = plan->leaf_count;
  pthread_mutex_unlock(&plan->lock);
  mtc_trace_file_span("wait for copy", "wait", leaves, 0, begin);
  return status;
}

MTC_API mtc_status mtc_plan_wait_device(mtc_plan *plan) {
  uint64_t begin = mtc_trace_file_now();
  mtc_status status = wait_device_locked(plan);
  if (status != MTC_OK) return status;
  status = settled_status_locked(plan);
  waiter_leave_locked(plan);
  uint64_t leaves = plan->leaf_count;
  pthread_mutex_unlock(&plan->lock);
  mtc_trace_file_span("wait for copy", "wait", leaves, 0, begin);
  return status;
}

MTC_API mtc_status mtc_plan_skip_copy_out(mtc_plan *plan, uint64_t leaf) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  mtc_status status = MTC_OK;
  if (plan->destinations == NULL || plan->target != MTC_DEVICE_CPU ||
      leaf >= plan->leaf_count) {
    status = mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "mtc_plan_skip_copy_out: leaf %llu is not a leaf "
                           "of this plan copied into host memory",
                           (unsigned long long)leaf);
  } else {
    status = mtc_plan_mark_copy_out_skipped(plan, leaf);
  }
  pthread_mutex_unlock(&plan->lock);
  return status;
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
    mtc_plan_record_error_locked(plan, -1);
    pthread_mutex_unlock(&plan->lock);
    return MTC_ERR_INVALID_STATE;
  }
  /* The event exists once the copy is enqueued: a background submission
   * is waited for (staging takes a while; the copy itself is not). */
  waiter_enter_locked(plan);
  while (plan->phase == MTC_PHASE_SUBMITTING) {
    pthread_cond_wait(&plan->submitted, &plan->lock);
  }
  waiter_leave_locked(plan);
  mtc_status status = MTC_OK;
  if (plan->phase == MTC_PHASE_FAILED) {
    status = mtc_plan_report(plan, plan->status);
  } else if (plan->completion != NULL) {
    mtc_event_retain(plan->completion);
    *out_event = plan->completion;
  }
  pthread_mutex_unlock(&plan->lock);
  return status;
}
