/* create.c — a plan's building phase: create it for a target, add its
 * leaves (each checked as it comes), name the caller's streams. */
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "plan/exit.h"
#include "plan/phase.h"
#include "plan/validate.h"

MTC_API mtc_status mtc_plan_create(int32_t target_device,
                                   const mtc_options *options,
                                   mtc_plan **out_plan) {
  if (out_plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_plan_create: out_plan must not be NULL");
  }
  *out_plan = NULL;
  mtc_options normalized;
  mtc_status status = mtc_options_normalize(options, &normalized);
  if (status != MTC_OK) return status;
  if (target_device < MTC_DEVICE_CPU) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "target device %d is neither MTC_DEVICE_CPU (-1) nor "
                         "a CUDA ordinal",
                         target_device);
  }
  if (target_device >= 0) {
    /* Fail early (no driver, no such device) and set the device up now
     * rather than in the middle of the first copy. */
    mtc_device *device;
    status = mtc_device_get(target_device, &device);
    if (status != MTC_OK) return status;
  }

  mtc_plan *plan = calloc(1, sizeof *plan);
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  plan->target = target_device;
  plan->options = normalized;
  plan->phase = MTC_PHASE_BUILDING;
  plan->status = MTC_OK;
  plan->error_leaf = -1;
  plan->stats.struct_size = sizeof plan->stats;
  pthread_mutex_init(&plan->lock, NULL);
  pthread_cond_init(&plan->submitted, NULL);
  pthread_cond_init(&plan->waiters_left, NULL);
  mtc_plan_count_created();
  mtc_plan_track(plan);
  *out_plan = plan;
  return MTC_OK;
}

/* A plan made from a prepared copy came laid out: its leaves are its
 * template's. */
static mtc_status fixed_leaves(void) {
  return mtc_error_set(MTC_ERR_INVALID_STATE,
                       "the plan was made from a prepared copy: its leaves "
                       "and their layouts are the prepared copy's");
}

/* Appends count leaves and, for a plan of copies into existing memory,
 * their destinations (NULL otherwise); all or none of the call's leaves. */
static mtc_status add_leaves(mtc_plan *plan, const mtc_leaf *leaves,
                             const mtc_leaf *destinations, uint64_t count) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (leaves == NULL && count > 0) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "leaves must not be NULL"),
                     -1);
  }
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "leaves can only be added before submit"),
                     -1);
  }
  if (plan->prepared.laid_out) return mtc_plan_fail(plan, fixed_leaves(), -1);
  int into = destinations != NULL ? 1 : -1;
  if (plan->into != 0 && plan->into != into) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "this plan has leaves %s destinations: "
                                   "mtc_plan_add_leaves_into and "
                                   "mtc_plan_add_leaf(s) cannot be mixed",
                                   into > 0 ? "without" : "with"),
                     -1);
  }
  for (uint64_t i = 0; i < count; i++) {
    uint64_t index = plan->leaf_count + i;
    mtc_status status = mtc_plan_check_leaf(&leaves[i], index);
    if (status == MTC_OK && destinations != NULL) {
      status = mtc_plan_check_destination(plan, &leaves[i], &destinations[i],
                                          index);
    }
    if (status != MTC_OK) return mtc_plan_fail(plan, status, (int64_t)index);
  }
  if (count > UINT64_MAX / 2 / sizeof(mtc_leaf) - plan->leaf_count) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "too many leaves"),
                     -1);
  }
  uint64_t needed = plan->leaf_count + count;
  if (needed > plan->leaf_capacity) {
    uint64_t grown = plan->leaf_capacity ? plan->leaf_capacity * 2 : 64;
    if (grown < needed) grown = needed;
    mtc_leaf *more = realloc(plan->leaves, (size_t)grown * sizeof *more);
    if (more != NULL) plan->leaves = more;
    if (more != NULL && into > 0) {
      more = realloc(plan->destinations, (size_t)grown * sizeof *more);
      if (more != NULL) plan->destinations = more;
    }
    if (more == NULL) {
      return mtc_plan_fail(plan,
                       mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                     "out of host memory for %llu leaves",
                                     (unsigned long long)needed),
                       -1);
    }
    plan->leaf_capacity = grown;
  }
  if (count > 0) {
    memcpy(plan->leaves + plan->leaf_count, leaves,
           (size_t)count * sizeof *leaves);
    for (uint64_t i = plan->leaf_count; i < needed; i++) {
      plan->leaves[i].flags &= ~MTC_LEAF_STRIDED_INTERNAL;
    }
    if (into > 0) {
      memcpy(plan->destinations + plan->leaf_count, destinations,
             (size_t)count * sizeof *destinations);
    }
    plan->into = into;
  }
  plan->leaf_count = needed;
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_add_leaves(mtc_plan *plan, const mtc_leaf *leaves,
                                       uint64_t count) {
  return add_leaves(plan, leaves, NULL, count);
}

MTC_API mtc_status mtc_plan_add_leaves_into(mtc_plan *plan,
                                            const mtc_leaf *leaves,
                                            const mtc_leaf *destinations,
                                            uint64_t count) {
  if (plan != NULL && destinations == NULL && count > 0) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "destinations must not be NULL"),
                     -1);
  }
  /* count 0 still marks the plan as one of copies into existing memory. */
  static const mtc_leaf none;
  return add_leaves(plan, leaves, destinations ? destinations : &none, count);
}

MTC_API mtc_status mtc_plan_add_leaf(mtc_plan *plan, const mtc_leaf *leaf,
                                     uint64_t *out_index) {
  if (plan != NULL && leaf == NULL) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "leaf must not be NULL"),
                     -1);
  }
  uint64_t index = plan ? plan->leaf_count : 0;
  mtc_status status = mtc_plan_add_leaves(plan, leaf, 1);
  if (status == MTC_OK && out_index != NULL) *out_index = index;
  return status;
}

MTC_API mtc_status mtc_leaves_set_addresses(mtc_leaf *leaves, uint64_t first,
                                            uint32_t count, const void *view0,
                                            const void *view1, const void *view2,
                                            const void *view3, const void *view4,
                                            const void *view5, const void *view6,
                                            const void *view7) {
  const void *views[8] = {view0, view1, view2, view3,
                          view4, view5, view6, view7};
  if (count > 8) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "count is %u; at most 8 views per call", count);
  }
  if (leaves == NULL && count > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "leaves must not be NULL");
  }
  for (uint32_t k = 0; k < count; k++) {
    mtc_leaf *leaf = &leaves[first + k];
    if (views[k] != NULL && leaf->bytes != 0) {
      leaf->address = (uint64_t)(uintptr_t)views[k];
    }
  }
  return MTC_OK;
}

MTC_API uint64_t mtc_plan_leaf_count(const mtc_plan *plan) {
  return plan ? plan->leaf_count : 0;
}

MTC_API mtc_status mtc_plan_set_stream(mtc_plan *plan, int32_t device,
                                       uint64_t stream) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "mtc_plan_set_stream: streams can only be "
                                   "set before submit"),
                     -1);
  }
  if (device < 0) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "mtc_plan_set_stream: device %d is not a "
                                   "CUDA ordinal (streams belong to CUDA "
                                   "devices)",
                                   device),
                     -1);
  }
  mtc_device *d;
  mtc_status status = mtc_device_get(device, &d);
  if (status != MTC_OK) return mtc_plan_fail(plan, status, -1);

  size_t i = 0;
  while (i < plan->stream_count && plan->streams[i].device != d) i++;
  if (stream == 0) {
    /* 0 takes the device's stream back out. */
    if (i < plan->stream_count) {
      plan->streams[i] = plan->streams[--plan->stream_count];
    }
    return MTC_OK;
  }
  if (i == plan->stream_count) {
    mtc_plan_stream *more =
        realloc(plan->streams, (plan->stream_count + 1) * sizeof *more);
    if (more == NULL) {
      return mtc_plan_fail(plan,
                       mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                     "out of host memory"),
                       -1);
    }
    plan->streams = more;
    plan->stream_count++;
  }
  plan->streams[i].device = d;
  plan->streams[i].stream = (CUstream)(uintptr_t)stream;
  plan->streams[i].ready = NULL;
  return MTC_OK;
}

MTC_API mtc_status mtc_plan_set_leaf_layout(mtc_plan *plan, uint64_t index,
                                            const mtc_leaf_layout *layout) {
  if (plan == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "plan must not be NULL");
  }
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_STATE,
                                   "a leaf's layout can only be set before "
                                   "submit"),
                     -1);
  }
  if (plan->prepared.laid_out) return mtc_plan_fail(plan, fixed_leaves(), -1);
  if (index >= plan->leaf_count) {
    return mtc_plan_fail(plan,
                     mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                                   "leaf %llu: no such leaf (the plan has "
                                   "%llu)",
                                   (unsigned long long)index,
                                   (unsigned long long)plan->leaf_count),
                     -1);
  }
  mtc_leaf *leaf = &plan->leaves[index];
  mtc_strided simple;
  int strided = 0;
  if (layout != NULL) {
    mtc_status status = mtc_plan_check_layout(leaf, layout, index);
    if (status != MTC_OK) return mtc_plan_fail(plan, status, (int64_t)index);
    strided = leaf->bytes > 0 &&
              mtc_strided_simplify(layout, leaf->element_size, &simple);
  }
  if (strided && index >= plan->strided_count) {
    /* Room for every leaf so far; later ones read as contiguous. */
    mtc_strided **more =
        realloc(plan->strided, (size_t)plan->leaf_count * sizeof *more);
    if (more == NULL) {
      return mtc_plan_fail(plan, mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                               "out of host memory"),
                           (int64_t)index);
    }
    memset(more + plan->strided_count, 0,
           (size_t)(plan->leaf_count - plan->strided_count) * sizeof *more);
    plan->strided = more;
    plan->strided_count = plan->leaf_count;
  }
  mtc_strided *kept = NULL;
  if (strided) {
    kept = malloc(sizeof *kept);
    if (kept == NULL) {
      return mtc_plan_fail(plan, mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                                               "out of host memory"),
                           (int64_t)index);
    }
    *kept = simple;
  }
  if (index < plan->strided_count) {
    free(plan->strided[index]);
    plan->strided[index] = kept;
  }
  if (kept != NULL) leaf->flags |= MTC_LEAF_STRIDED_INTERNAL;
  else leaf->flags &= ~MTC_LEAF_STRIDED_INTERNAL;
  return MTC_OK;
}
