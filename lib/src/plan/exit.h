/* exit.h — every live plan, so that a process that exits while copies
 * stage stops their reads of host memory before that memory goes. */
#ifndef MTC_PLAN_EXIT_H
#define MTC_PLAN_EXIT_H

#include "run/plan_state.h"

/* Lists a new plan. The first call keeps libmtc loaded for good and
 * registers the exit handler (atexit and at_quick_exit): it stops every
 * listed plan's reads as mtc_plan_stop_reading does (mtc_plan_read_stop),
 * waiting for a read in progress. */
void mtc_plan_track(mtc_plan *plan);

/* Takes a plan off the list (before it is freed). */
void mtc_plan_untrack(mtc_plan *plan);

#endif
