/* in_flight.h — the end of a plan's copy, and the plans whose copies are in
 * flight while they still hold pinned staging, oldest first. A copy ends
 * when poll or wait sees its completion event, and also when a staging
 * request at the pinned pool's limit settles it (mtc_in_flight_settle), so
 * that copies nobody polls give their staging back too. */
#ifndef MTC_RUN_IN_FLIGHT_H
#define MTC_RUN_IN_FLIGHT_H

#include "run/plan_state.h"

/* Lock held, phase IN_FLIGHT: the completion event has completed; the
 * staging goes back to its pools at once (the next copy can reuse it) and
 * the plan is DONE. Otherwise nothing. */
void mtc_plan_complete_locked(mtc_plan *plan);

/* Lock held, phase IN_FLIGHT: the driver reported `result` for the
 * completion event; the plan FAILED with that error, and its staging goes
 * back (none of its copies runs any more). Otherwise nothing. */
void mtc_plan_fail_locked(mtc_plan *plan, CUresult result, const char *what);

/* Gives the plan's staging memory back to its pools and takes the plan off
 * the list (idempotent). The copies that read the staging must be over. */
void mtc_transfer_return_staging(mtc_plan *plan);

/* Lock held, phase just set to IN_FLIGHT: lists the plan when it holds
 * staging. */
void mtc_in_flight_add_locked(mtc_plan *plan);

/* For release: takes the plan off the list and waits until no thread that
 * found it there still looks at it. */
void mtc_in_flight_forget(mtc_plan *plan);

/* Ends the copies of listed plans that are over, oldest first, so their
 * staging comes back; with `wait`, when the oldest is still running, waits
 * for it first. Returns how many plans it ended. */
int mtc_in_flight_settle(int wait);

#endif
