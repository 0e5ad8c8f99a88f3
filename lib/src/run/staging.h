/* staging.h — pinned staging for one submission, within the pinned pool's
 * limit. At the limit a submission first ends the copies in flight that are
 * over, then lets its own earlier staging go (after waiting for the DMAs
 * that read it), then waits for the oldest copy in flight: so a plan that
 * needs more staging than the limit goes through it a piece at a time, and
 * copies nobody polls still give their staging back. */
#ifndef MTC_RUN_STAGING_H
#define MTC_RUN_STAGING_H

#include "run/transfer_context.h"

/* A pinned staging buffer of at least `bytes` (at most
 * t->plan->staging_max_bytes) for copies on device's copy stream, kept by
 * the plan until its copy is over and counted in its stats. Waits at the
 * pool's limit as above; device's context is current when it returns. The
 * ring of piece buffers may have been emptied meanwhile (t->pieces). */
mtc_status mtc_transfer_acquire_staging(mtc_transfer *t, mtc_device *device,
                                        size_t bytes, mtc_pinned_buffer *out);

#endif
