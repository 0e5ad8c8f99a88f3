/* planner.h — where each leaf of a plan goes: pure layout logic, no CUDA and
 * no allocation of copy memory, so it can be tested on its own.
 *
 * Every leaf gets one placement:
 *   ZERO    0 bytes: nothing to copy; result address 0, no block.
 *   REUSED  already on the target and contiguous: the input is the result.
 *   PACKED  copied into chunk `chunk` at byte `offset`.
 *   OWN     copied into a block of its own.
 * A host leaf bound for a device that lies in a pinned region (the caller's
 * `regions`) is PACKED into a direct chunk: a run of that region's host
 * memory DMA'd as it is, no staging, so the leaf's offset in the chunk is
 * its distance from the run's start (the run starts 256-aligned, so
 * offsets keep the host's alignment). Leaves of one region within
 * MTC_DIRECT_GAP_BYTES of each other share a run.
 * Packed leaves are grouped by source device (host leaves never share a
 * chunk with device leaves, nor devices with each other); within a group
 * chunks fill greedily in leaf order. */
#ifndef MTC_PLANNER_H
#define MTC_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "mtc.h"

typedef enum mtc_placement_kind {
  MTC_PLACE_ZERO = 0,
  MTC_PLACE_REUSED = 1,
  MTC_PLACE_PACKED = 2,
  MTC_PLACE_OWN = 3
} mtc_placement_kind;

typedef struct mtc_placement {
  mtc_placement_kind kind;
  uint32_t chunk;  /* PACKED only */
  uint64_t offset; /* PACKED only: byte offset in the chunk */
} mtc_placement;

typedef struct mtc_chunk {
  int32_t source_device; /* where all of the chunk's leaves come from */
  uint64_t bytes;        /* end of its last leaf */
  uint64_t leaf_count;
  /* A direct chunk: the host address of its first byte (the chunk is
   * bytes of pinned memory from there, copied as they lie); 0 otherwise. */
  uint64_t direct_address;
} mtc_chunk;

/* The pinned host memory a leaf lies in: [begin, end), or 0, 0. */
typedef struct mtc_region {
  uint64_t begin, end;
} mtc_region;

/* Most bytes between two leaves of one region that one direct run spans
 * (copying a gap costs less than issuing another DMA). */
#define MTC_DIRECT_GAP_BYTES ((uint64_t)64 << 10)
/* Direct runs start at a multiple of this (in the region). */
#define MTC_DIRECT_ALIGNMENT 256u

typedef struct mtc_layout {
  mtc_placement *placements; /* one per leaf */
  size_t leaf_count;
  mtc_chunk *chunks;
  size_t chunk_count;
  size_t own_count; /* leaves placed OWN */
} mtc_layout;

/* True when the leaf may share a chunk under these options. */
/* Set by the plan on its own copy of a leaf that has a layout (mtc_plan_set_leaf_layout),
 * cleared from leaves as they are added: such a leaf is copied, never reused. */
#define MTC_LEAF_STRIDED_INTERNAL (1u << 31)

int mtc_planner_packable(const mtc_leaf *leaf, const mtc_options *options);

/* Where a packed leaf may start: a multiple of
 * round_up(max(min_alignment, element_size), element_size), so any
 * min_alignment (1..4096) works and a leaf stays aligned to its elements
 * (6 gives 6 for 2-byte elements and 8 for 4-byte ones). */
uint64_t mtc_planner_alignment(uint64_t min_alignment, uint32_t element_size);

/* Lays out leaves for target_device. options must be valid (see
 * mtc_options_normalize). regions: one per leaf, or NULL when no leaf lies
 * in pinned memory. Returns MTC_OK or MTC_ERR_OUT_OF_MEMORY. */
mtc_status mtc_planner_layout(const mtc_leaf *leaves, size_t count,
                              int32_t target_device,
                              const mtc_options *options,
                              const mtc_region *regions, mtc_layout *out);

/* The layout of a plan of copies into existing memory: the same, except
 * that no leaf is REUSED (each one is copied into its destination). */
mtc_status mtc_planner_layout_into(const mtc_leaf *leaves, size_t count,
                                   const mtc_options *options,
                                   mtc_layout *out);

void mtc_layout_free(mtc_layout *layout);

/* What a layout says about a copy of `leaves` (the ones laid out): how many
 * leaves are reused, packed, and packed into direct chunks, and the bytes
 * copied (packed and own leaves). */
typedef struct mtc_layout_counts {
  uint64_t reused, packed, direct, bytes;
} mtc_layout_counts;

void mtc_layout_count(const mtc_layout *layout, const mtc_leaf *leaves,
                      mtc_layout_counts *out);

/* A copy of `from` into *out (its own arrays). MTC_OK or
 * MTC_ERR_OUT_OF_MEMORY (*out then empty). */
mtc_status mtc_layout_copy(const mtc_layout *from, mtc_layout *out);

#endif
