/* plan_state.c — small things run/ and plan/ both do to a plan's state:
 * the caller's stream on the target, the stored error, and the guard
 * around every read of the leaves' host memory (and its closing, for
 * mtc_plan_stop_reading and the exit handler). */
#include "run/plan_state.h"

#include <stdatomic.h>
#include <time.h>

#include "base/clock.h"

void mtc_plan_record_error_locked(mtc_plan *plan, int64_t leaf) {
  mtc_format(plan->error, sizeof plan->error, "%s", mtc_error_text());
  plan->error_leaf = leaf;
}

CUstream mtc_plan_target_stream(const mtc_plan *plan) {
  for (size_t i = 0; i < plan->stream_count; i++) {
    if (plan->streams[i].device->ordinal == plan->target) {
      return plan->streams[i].stream;
    }
  }
  return NULL;
}

mtc_status mtc_plan_read_begin(mtc_plan *plan) {
  atomic_store(&plan->reading, 1);
  if (atomic_load(&plan->stop_reading)) {
    atomic_store(&plan->reading, 0);
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "the copy stopped reading host memory before it "
                         "was staged (mtc_plan_stop_reading: the runtime is "
                         "freeing that memory, as at exit)");
  }
  return MTC_OK;
}

void mtc_plan_read_end(mtc_plan *plan) { atomic_store(&plan->reading, 0); }

void mtc_plan_end_pinned_uses(mtc_plan *plan, mtc_event *completion) {
  if (!plan->pinned_uses_open) return;
  plan->pinned_uses_open = 0;
  for (size_t k = 0; k < plan->pinned_count; k++) {
    /* Marked for the copy-out before the submission's mark goes, so the
     * block is never idle in between. */
    if (plan->pinned_how[k] & MTC_PINNED_COPY_OUT) {
      mtc_block_copy_out_begin(plan->pinned[k]);
      plan->pinned_copy_outs_open = 1;
    }
    mtc_block_use_end(plan->pinned[k], completion);
  }
}

void mtc_plan_end_copy_outs(mtc_plan *plan) {
  if (!plan->pinned_copy_outs_open) return;
  plan->pinned_copy_outs_open = 0;
  for (size_t k = 0; k < plan->pinned_count; k++) {
    if (plan->pinned_how[k] & MTC_PINNED_COPY_OUT) {
      mtc_block_copy_out_end(plan->pinned[k]);
    }
  }
}

mtc_status mtc_plan_read_stop(mtc_plan *plan, uint32_t timeout_ms) {
  atomic_store(&plan->stop_reading, 1);
  uint64_t deadline = mtc_clock_ns() + (uint64_t)timeout_ms * 1000000u;
  /* Reads are memcpys and driver calls: short, so a poll is enough. */
  while (atomic_load(&plan->reading)) {
    if (mtc_clock_ns() >= deadline) {
      return mtc_error_set(MTC_IN_PROGRESS,
                           "mtc_plan_stop_reading: a read of host memory "
                           "was still in progress after %u ms", timeout_ms);
    }
    struct timespec pause = {0, 50 * 1000};
    nanosleep(&pause, NULL);
  }
  return MTC_OK;
}
