/* results.c — what a finished plan tells: each leaf's result, its error
 * and the leaf that error is about. */
#include <string.h>

#include "plan/phase.h"

MTC_API mtc_status mtc_plan_results(mtc_plan *plan, uint64_t first,
                                    uint64_t count, mtc_leaf_result *out) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  pthread_mutex_lock(&plan->lock);
  mtc_plan_phase phase = plan->phase;
  pthread_mutex_unlock(&plan->lock);
  if (phase == MTC_PHASE_FAILED) {
    /* Keep the copy's own error as the plan's message. */
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "the copy failed, so it has no results: %s",
                         mtc_plan_last_error(plan));
  }
  if (phase != MTC_PHASE_DONE) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "results are readable only after poll or "
                                   "wait returned MTC_OK"),
                     -1);
  }
  if (first > plan->leaf_count || count > plan->leaf_count - first) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "results [%llu, %llu + %llu) are outside "
                                   "the plan's %llu leaves",
                                   (unsigned long long)first,
                                   (unsigned long long)first,
                                   (unsigned long long)count,
                                   (unsigned long long)plan->leaf_count),
                     -1);
  }
  if (out == NULL && count > 0) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "out must not be NULL"),
                     -1);
  }
  if (count > 0) {
    memcpy(out, plan->results + first, (size_t)count * sizeof *out);
  }
  return MTC_OK;
}

MTC_API const char *mtc_plan_last_error(const mtc_plan *plan) {
  return plan ? plan->error : "";
}

MTC_API int64_t mtc_plan_error_leaf(const mtc_plan *plan) {
  return plan ? plan->error_leaf : -1;
}
