/* into_scatter.h — host chunks into existing device memory, for into.c. */
#ifndef MTC_RUN_INTO_SCATTER_H
#define MTC_RUN_INTO_SCATTER_H

#include "run/transfer_context.h"

/* Fewest packed leaves worth a kernel launch rather than one copy each. */
#define MTC_INTO_KERNEL_MIN_LEAVES 2

/* Where leaf `leaf` of an into plan goes. */
static inline uint64_t mtc_into_destination(const mtc_plan *plan, uint64_t leaf) {
  return plan->destinations[leaf].address;
}

/* Enters the target: copies on its stream write destinations only after
 * the caller's work queued there before submit. */
mtc_status mtc_into_enter_target(mtc_transfer *t, mtc_device **target);

/* Host chunk c, its packed leaves being all->leaves[first ...], into the
 * target's destinations: staged, with its scatter table behind the leaves
 * unless a prepared copy keeps the table on the device, one DMA into a
 * scratch block, one scatter launch (a small chunk in pinned staging: the
 * launch alone). Without kernels, for a single leaf, or when the table
 * does not fit a staging buffer: one DMA a leaf out of the staged chunk. */
mtc_status mtc_into_scatter_chunk(mtc_transfer *t, size_t c,
                                  const mtc_chunk_members *all, uint64_t first);

#endif
