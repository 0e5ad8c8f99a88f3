/* copy_out.h — the last step of a copy into host destinations: the bytes
 * that device -> host leaves left in pinned blocks, copied out into the
 * destinations once the copy has completed. */
#ifndef MTC_RUN_COPY_OUT_H
#define MTC_RUN_COPY_OUT_H

#include "run/plan_state.h"

/* Copies plan->copy_out (nothing when empty) on the staging threads, under
 * the read guard (mtc_plan_stop_reading stops it: MTC_ERR_INVALID_STATE,
 * the last error set). The plan's lock held, its copy completed. */
mtc_status mtc_plan_copy_out(mtc_plan *plan);

#endif
