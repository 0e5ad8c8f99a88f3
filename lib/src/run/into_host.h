/* into_host.h — device leaves copied into host destinations that lie in
 * pinned memory of the library's (pinned tensors, arenas: destinations
 * flagged MTC_LEAF_PINNED and found at submit). The GPU writes them in
 * place, with no pinned output block and no copy-out: a source device's
 * packed leaves by one gather launch whose table points at the
 * destinations (pinned memory is device-addressable under unified
 * addressing), own leaves by one DMA each. The bytes land in stream order
 * while the copy runs; the caller reads them once the copy is complete. */
#ifndef MTC_RUN_INTO_HOST_H
#define MTC_RUN_INTO_HOST_H

#include "run/directions.h"

/* Keeps plan->direct_dst[i] only for leaves that will be written in place:
 * own leaves, and packed leaves of a source device all of whose packed
 * leaves have pinned destinations (a gather writes one source's leaves
 * together). Returns how many. */
uint64_t mtc_into_direct_settle(mtc_plan *plan, const mtc_chunk_members *members);

/* Is leaf i written in place? */
static inline int mtc_into_direct(const mtc_plan *plan, uint64_t i) {
  return plan->direct_dst != NULL && plan->direct_dst[i];
}

/* A source device whose packed leaves are all written in place: one gather
 * launch into the destinations (*done 1), or nothing enqueued (*done 0:
 * too few leaves, no kernels; the chunks then go a DMA a leaf). */
mtc_status mtc_into_direct_gather(mtc_transfer *t, int32_t source_ordinal,
                                  const mtc_chunk_members *members, int *done);

/* One leaf written in place by one DMA. */
mtc_status mtc_into_direct_leaf(mtc_transfer *t, uint64_t i);

#endif
