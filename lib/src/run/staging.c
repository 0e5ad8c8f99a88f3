/* staging.c — taking pinned staging within the pool's limit (staging.h). */
#include "run/staging.h"

#include <time.h>

#include "base/clock.h"
#include "run/in_flight.h"

/* Waits for every DMA this submission enqueued, then gives all of its
 * staging back (pinned buffers, piece ring included, and malloc'd copies). */
static void let_own_staging_go(mtc_transfer *t) {
  for (size_t i = 0; i < t->used_count; i++) {
    if (mtc_context_scope_use(&t->scope, t->used[i]) == MTC_OK) {
      t->cu->cuStreamSynchronize(t->used[i]->stream);
    }
  }
  mtc_transfer_return_staging(t->plan);
  for (size_t k = 0; k < MTC_PIECE_RING; k++) {
    t->pieces[k].buffer.ptr = NULL;
    t->pieces[k].recorded = 0; /* the event stays held, for the next buffer */
  }
  t->slot_ready = 0;
  t->slot_fill = 0;
}

/* The pool's reclaim function for a submission at the limit. */
static int reclaim(void *context) {
  mtc_transfer *t = context;
  if (mtc_in_flight_settle(0) > 0) return 1;
  if (t->plan->staging_count > 0) {
    uint64_t begin = mtc_clock_ns();
    let_own_staging_go(t);
    mtc_trace_span(t->trace, "wait", "limit", -1, 0, begin);
    return 1;
  }
  if (mtc_in_flight_settle(1) > 0) return 1;
  /* Staging lent to a submission on another thread comes back when it
   * enqueues its copy or lets its own staging go. */
  if (mtc_pinned_staging_in_use() > 0) {
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
    return 1;
  }
  return 0;
}

mtc_status mtc_transfer_acquire_staging(mtc_transfer *t, mtc_device *device,
                                        size_t bytes, mtc_pinned_buffer *out) {
  mtc_status status =
      mtc_pinned_acquire_staging(device, bytes, reclaim, t, out);
  if (status != MTC_OK) return status;
  mtc_plan_keep_pinned(t->plan, out);
  mtc_transfer_count_pinned(t, out);
  /* Freeing idle buffers or waiting may have made another context current. */
  return mtc_context_scope_use(&t->scope, device);
}
