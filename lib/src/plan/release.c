/* release.c — the end of a plan: stop reading host memory (a runtime about
 * to free it, as at exit) and release everything the plan holds. */
#include <stdlib.h>

#include "plan/exit.h"
#include "plan/phase.h"
#include "run/in_flight.h"

MTC_API mtc_status mtc_plan_stop_reading(mtc_plan *plan, uint32_t timeout_ms) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  return mtc_plan_read_stop(plan, timeout_ms);
}

MTC_API void mtc_plan_release(mtc_plan *plan) {
  if (plan == NULL) return;
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    /* Copies in flight still read staging and write blocks. A copy into
     * host destinations not written yet is dropped: release never writes
     * them (it may run at garbage-collection time). */
    mtc_plan_wait_device(plan);
  }
  /* A wait on another thread (an FFI call on a runtime's pool) may still be
   * on its way out of the plan. */
  pthread_mutex_lock(&plan->lock);
  while (plan->waiters > 0) pthread_cond_wait(&plan->waiters_left, &plan->lock);
  pthread_mutex_unlock(&plan->lock);
  mtc_plan_untrack(plan);
  /* A staging request at the pinned pool's limit may be settling it. */
  mtc_in_flight_forget(plan);
  mtc_transfer_return_staging(plan);
  for (size_t i = 0; i < plan->block_count; i++) {
    mtc_block_release(plan->blocks[i]);
  }
  mtc_plan_end_pinned_uses(plan, NULL); /* submitted, never run */
  mtc_plan_end_copy_outs(plan);          /* a copy-out never to run */
  for (size_t i = 0; i < plan->pinned_count; i++) {
    mtc_block_release(plan->pinned[i]);
  }
  free(plan->pinned);
  free(plan->pinned_how);
  free(plan->direct_dst);
  mtc_event_release(plan->completion);
  for (size_t i = 0; i < plan->held_count; i++) {
    mtc_device_event_release(plan->held_events[i].device,
                             plan->held_events[i].event);
  }
  for (size_t i = 0; i < plan->stream_count; i++) {
    mtc_device_event_release(plan->streams[i].device,
                             plan->streams[i].ready);
  }
  mtc_block_release(plan->prepared.scatter_tables);
  mtc_layout_free(&plan->layout);
  free(plan->leaves);
  for (uint64_t i = 0; i < plan->strided_count; i++) free(plan->strided[i]);
  free(plan->strided);
  free(plan->destinations);
  for (uint64_t i = 0; i < plan->destination_block_capacity; i++) {
    mtc_block_release(plan->destination_blocks[i]);
  }
  free(plan->destination_blocks);
  free(plan->copy_out);
  free(plan->copy_out_leaves);
  free(plan->copy_out_skip);
  free(plan->streams);
  free(plan->results);
  free(plan->blocks);
  free(plan->staging);
  free(plan->held_events);
  pthread_cond_destroy(&plan->submitted);
  pthread_cond_destroy(&plan->waiters_left);
  pthread_mutex_destroy(&plan->lock);
  free(plan);
  mtc_plan_count_released();
}
