/* submit.h — what mtc_plan_submit works out for a plan, for a prepared
 * copy (prepared.c) to work it out once for its template. */
#ifndef MTC_PLAN_SUBMIT_H
#define MTC_PLAN_SUBMIT_H

#include <stdint.h>

#include "run/plan_state.h"

/* The most bytes a packed chunk may have under `options` when the largest
 * pinned staging buffer is staging_max_bytes (mtc_pinned_staging_max_bytes):
 * the option, cut to that. */
uint64_t mtc_plan_chunk_limit(const mtc_options *options, size_t staging_max_bytes);

/* Lays the plan's leaves out as submit does, with packed chunks of at most
 * chunk_limit bytes; regions: the pinned memory each leaf lies in (NULL:
 * none). Reads the plan only. MTC_OK, or MTC_ERR_OUT_OF_MEMORY with the
 * thread's last error set. */
mtc_status mtc_plan_lay_out(const mtc_plan *plan, uint64_t chunk_limit,
                            const mtc_region *regions, mtc_layout *out);

#endif
