/* phase.c — the plan's phase and stored error, and the count of live plans:
 * the bookkeeping every life-cycle call of plan/ shares. The phase is
 * guarded by plan->lock because poll, wait and release may run while the
 * background thread is still submitting, and two threads may wait on one
 * plan at once. */
#include "plan/phase.h"

#include <stdatomic.h>

static atomic_uint_fast64_t plans_live;

uint64_t mtc_plan_live_count(void) { return atomic_load(&plans_live); }

void mtc_plan_count_created(void) { atomic_fetch_add(&plans_live, 1); }

void mtc_plan_count_released(void) { atomic_fetch_sub(&plans_live, 1); }

mtc_status mtc_plan_fail(mtc_plan *plan, mtc_status status, int64_t leaf) {
  pthread_mutex_lock(&plan->lock);
  /* A failed plan keeps the error that ended it: poll and wait report that
   * status, and its message must go with it. The rejected call's own
   * message is the thread's last error. */
  if (plan->phase != MTC_PHASE_FAILED) mtc_plan_record_error_locked(plan, leaf);
  pthread_mutex_unlock(&plan->lock);
  return status;
}

mtc_plan_phase mtc_plan_phase_of(mtc_plan *plan) {
  pthread_mutex_lock(&plan->lock);
  mtc_plan_phase phase = plan->phase;
  pthread_mutex_unlock(&plan->lock);
  return phase;
}

/* A submit that failed before any copy started ends the plan. */
mtc_status mtc_plan_fail_submit(mtc_plan *plan, mtc_status status,
                              int64_t leaf) {
  mtc_plan_end_pinned_uses(plan, NULL); /* nothing was enqueued */
  pthread_mutex_lock(&plan->lock);
  mtc_plan_record_error_locked(plan, leaf);
  plan->status = status;
  plan->phase = MTC_PHASE_FAILED;
  pthread_mutex_unlock(&plan->lock);
  return status;
}

/* Hands the plan's stored error to the calling thread's last error. */
mtc_status mtc_plan_report(const mtc_plan *plan, mtc_status status) {
  return mtc_error_set_text(status, plan->error);
}
