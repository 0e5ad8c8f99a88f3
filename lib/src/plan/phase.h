/* phase.h — the bookkeeping every life-cycle call of plan/ shares: the
 * plan's phase and stored error, and the count of live plans. */
#ifndef MTC_PLAN_PHASE_H
#define MTC_PLAN_PHASE_H

#include <stdint.h>

#include "run/plan_state.h"

/* Plans created and not yet released (for mtc_get_stats). */
uint64_t mtc_plan_live_count(void);
void mtc_plan_count_created(void);
void mtc_plan_count_released(void);

/* Records the thread's last error as the plan's and returns status; the
 * phase is left as it is. For calls the plan rejects: a plan that has
 * failed keeps its own error (poll and wait report it). */
mtc_status mtc_plan_fail(mtc_plan *plan, mtc_status status, int64_t leaf);

/* The phase, read under the lock. */
mtc_plan_phase mtc_plan_phase_of(mtc_plan *plan);

/* A submit that failed before any copy started: records the error and ends
 * the plan (MTC_PHASE_FAILED). Returns status. */
mtc_status mtc_plan_fail_submit(mtc_plan *plan, mtc_status status,
                                int64_t leaf);

/* Hands the plan's stored error to the calling thread's last error and
 * returns status. */
mtc_status mtc_plan_report(const mtc_plan *plan, mtc_status status);

#endif
