/* copy_out.h — the last step of a copy into host destinations: the bytes
 * that device -> host leaves left in pinned blocks, and those of host ->
 * host leaves, copied into the destinations on the caller's thread, by the
 * poll or wait that finds the copy complete (never at release, nor when the
 * pinned pool settles plans at its limit on behalf of another copy). */
#ifndef MTC_RUN_COPY_OUT_H
#define MTC_RUN_COPY_OUT_H

#include "run/plan_state.h"

/* Copies plan->copy_out (nothing when empty), less the leaves marked in
 * copy_out_skip, on the staging threads, under the read guard
 * (mtc_plan_stop_reading stops it: MTC_ERR_INVALID_STATE, the last error
 * set). Empties copy_out: a second call copies nothing. Then the pinned
 * blocks it used are no longer busy for it (mtc_plan_end_copy_outs). The
 * plan's lock held, its copy completed. */
mtc_status mtc_plan_copy_out(mtc_plan *plan);

/* Marks the pinned blocks of the library's that the copy-out will read
 * (host sources) or write (destinations) MTC_PINNED_COPY_OUT, so that they
 * stay busy until it ran. The submission, once copy_out is listed. */
void mtc_plan_mark_copy_out_blocks(mtc_plan *plan);

/* Marks leaf `leaf` so that its destination is not written by the copy-out
 * (a later copy writes it). The plan's lock held. */
mtc_status mtc_plan_mark_copy_out_skipped(mtc_plan *plan, uint64_t leaf);

#endif
