/* directions.h — the copy of each direction, one file each, called by
 * transfer.c for every packed chunk and every own (unpacked) leaf:
 *
 *   host -> device    to_device.c   staged through pinned memory, one DMA a chunk
 *   device -> host    to_host.c     one DMA a leaf into pinned host blocks
 *   device -> device  peer.c        one peer copy a leaf on the target's stream
 *   host -> host      host_copy.c   staged into malloc'd host blocks
 *   packed leaves of one GPU, any target: gather.c, one kernel launch
 *   into existing memory, every direction: into.c (see there)
 *
 * Each writes the output block it made to *out (kept by the plan) and
 * returns the status, the thread's last error set on failure. */
#ifndef MTC_RUN_DIRECTIONS_H
#define MTC_RUN_DIRECTIONS_H

#include "run/transfer_context.h"

/* Chunk c of the layout, whose leaves are members[0 .. count). */
mtc_status mtc_to_device_chunk(mtc_transfer *t, size_t c,
                               const uint64_t *members, uint64_t count,
                               mtc_block **out);
mtc_status mtc_to_host_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                             uint64_t count, mtc_block **out);
mtc_status mtc_peer_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                          uint64_t count, mtc_block **out);
mtc_status mtc_host_chunk(mtc_transfer *t, size_t c, const uint64_t *members,
                          uint64_t count, mtc_block **out);

/* A leaf copied on its own. */
mtc_status mtc_to_device_own_leaf(mtc_transfer *t, const mtc_leaf *leaf,
                                  mtc_block **out);
mtc_status mtc_to_host_own_leaf(mtc_transfer *t, uint64_t index, mtc_block **out);
mtc_status mtc_peer_own_leaf(mtc_transfer *t, uint64_t index, mtc_block **out);
mtc_status mtc_host_own_leaf(mtc_transfer *t, const mtc_leaf *leaf,
                             mtc_block **out);

/* Copies a host leaf to dst on target (entered): streamed through pinned
 * pieces, or handed to the driver with pinned staging off. */
mtc_status mtc_to_device_leaf_at(mtc_transfer *t, mtc_device *target,
                                 const mtc_leaf *leaf, CUdeviceptr dst);

/* How many packed leaves the chunks from source device source_ordinal hold. */
/* Fewest packed leaves of one source device worth a gather kernel: below
 * it one DMA per leaf costs no more than one launch. */
#define MTC_GATHER_MIN_LEAVES 2

uint64_t mtc_packed_leaves_from(const mtc_layout *layout, int32_t source_ordinal);

/* Launches the segment-copy kernel on `source`'s copy stream over the packed
 * leaves of the chunks whose source is source_ordinal (`leaves` of them),
 * each written into its chunk's block in chunk_blocks, or with chunk_blocks
 * NULL to its destination (mtc_plan_add_leaves_into): one launch per pinned
 * table, each table within the plan's largest staging buffer. */
mtc_status mtc_gather_launch(mtc_transfer *t, mtc_device *source,
                             int32_t source_ordinal,
                             const mtc_chunk_members *members, uint64_t leaves,
                             mtc_block *const *chunk_blocks);

/* Gathers every packed leaf of one source device with one kernel launch on
 * the source's copy stream: into pinned host blocks (target host), or into
 * device blocks of the target (pushed over peer access); chunk_blocks[c]
 * receives each chunk's block. Leaves *done at 0, having enqueued nothing,
 * when the path does not apply: too few leaves, no kernels, or no peer
 * access between the pair. */
mtc_status mtc_gather_source(mtc_transfer *t, int32_t source_ordinal,
                             const mtc_chunk_members *members,
                             mtc_block **chunk_blocks, int *done);

#endif
