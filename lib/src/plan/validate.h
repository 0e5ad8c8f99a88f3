/* validate.h — what makes a leaf acceptable. */
#ifndef MTC_PLAN_VALIDATE_H
#define MTC_PLAN_VALIDATE_H

#include <stdint.h>

#include "run/plan_state.h"

/* Checks one leaf's own fields (address, sizes, element size, device
 * number, strides); index is its index in the plan, for the message. Sets
 * the thread's last error on failure. */
mtc_status mtc_plan_check_leaf(const mtc_leaf *leaf, uint64_t index);

/* At submit: every CUDA leaf names a device this machine has. On failure
 * the plan is failed (mtc_plan_fail_submit) naming the leaf. */
mtc_status mtc_plan_check_leaf_devices(mtc_plan *plan);

/* Checks a layout given to `leaf` (mtc_plan_set_leaf_layout): the leaf is
 * on the host without rows, the rank, the shape against the leaf's bytes,
 * no overflow. Sets the thread's last error on failure. */
mtc_status mtc_plan_check_layout(const mtc_leaf *leaf,
                                 const mtc_leaf_layout *layout,
                                 uint64_t index);
/* A destination of mtc_plan_add_leaves_into for `leaf` (index `index`):
 * the leaf's bytes and element size, contiguous, on the plan's target. */
mtc_status mtc_plan_check_destination(const mtc_plan *plan,
                                      const mtc_leaf *leaf,
                                      const mtc_leaf *destination,
                                      uint64_t index);

/* At submit, for a plan of copies into existing memory (overlap.c): no
 * destination shares a byte with another destination or with any leaf's
 * source on the same device (its own or another's). On failure the plan is
 * failed (mtc_plan_fail_submit) naming the later leaf. */
mtc_status mtc_plan_check_destinations(mtc_plan *plan);

#endif
