/* validate.h — what makes a leaf acceptable. */
#ifndef MTC_PLAN_VALIDATE_H
#define MTC_PLAN_VALIDATE_H

#include <stdint.h>

#include "run/plan_state.h"

/* Checks one leaf's own fields (address, sizes, element size, device
 * number, strides); index is its index in the plan, for the message. Sets
 * the thread's last error on failure. */
mtc_status mtc_plan_check_leaf(const mtc_leaf *leaf, uint64_t index);

/* The checks of mtc_plan_check_leaf that depend on the leaf's address
 * alone, for a leaf whose other fields passed them already (a prepared
 * copy's): extent is the bytes its source spans from there
 * (mtc_plan_source_extent). Sets the thread's last error on failure. */
mtc_status mtc_plan_check_leaf_address(const mtc_leaf *leaf, uint64_t extent,
                                       uint64_t index);

/* The same for a destination (mtc_plan_check_destination). */
mtc_status mtc_plan_check_destination_address(const mtc_leaf *destination,
                                              uint64_t index);

/* At submit: every CUDA leaf names a device this machine has. On failure
 * the plan is failed (mtc_plan_fail_submit) naming the leaf. */
mtc_status mtc_plan_check_leaf_devices(mtc_plan *plan);

/* The same check, reading the plan only: on failure the thread's last
 * error is set and *leaf names the leaf. */
mtc_status mtc_plan_find_missing_device(const mtc_plan *plan, int64_t *leaf);

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

/* The same check, reading the plan only: on failure the thread's last
 * error is set and *leaf names the later leaf (-1: out of memory). */
mtc_status mtc_plan_find_overlap(const mtc_plan *plan, int64_t *leaf);

/* The bytes leaf i's source spans from its address: its bytes, strided
 * rows apart, or an N-d layout's reach (more than its bytes when sliced or
 * transposed, fewer when broadcast). */
uint64_t mtc_plan_source_extent(const mtc_plan *plan, uint64_t i);

#endif
