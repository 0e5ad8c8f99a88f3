/* copy_out.c — copying device -> host leaves of a plan of copies into
 * existing memory out of the pinned blocks they landed in (see
 * copy_out.h). Runs on whichever thread sees the copy complete: poll,
 * wait, or a staging request at the pinned pool's limit settling it. */
#include "run/copy_out.h"

mtc_status mtc_plan_copy_out(mtc_plan *plan) {
  if (plan->copy_out_count == 0) return MTC_OK;
  /* The destinations are the caller's memory: the guard keeps the write
   * from running once the runtime has begun to free it. */
  mtc_status status = mtc_plan_read_begin(plan);
  if (status != MTC_OK) return status;
  mtc_stage_copy(plan->copy_out, plan->copy_out_count,
                 plan->options.staging_threads);
  mtc_plan_read_end(plan);
  plan->copy_out_count = 0;
  return MTC_OK;
}
