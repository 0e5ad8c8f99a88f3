/* mtc/leaf.h — mtc_leaf, one tensor to copy, and its flags.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_LEAF_H
#define MTC_PUBLIC_LEAF_H

#ifndef MTC_H
#error "include mtc.h, not mtc/leaf.h"
#endif

/* ------------------------------------------------------------------ leaves */

/* mtc_leaf.flags */
enum {
  /* Never pack this leaf: copy it into a block of its own. */
  MTC_LEAF_NO_PACK = 1u,
  /* The leaf may lie in pinned host memory of the library's (a block of
   * mtc_host_block_alloc, or a pinned host output of a copy): the plan
   * looks it up at submit and, when found, DMAs it in place instead of
   * staging it (see "pinned host memory" below). Found in any case (a
   * strided or pitched leaf, which is staged; a leaf or destination of
   * mtc_plan_add_leaves_into, whatever its direction), the plan holds the
   * block and marks it busy until the copy is over (mtc_block_busy). A
   * leaf not found is staged as usual. Only a hint: a lookup costs a
   * little, so leave it off for leaves known to be pageable. */
  MTC_LEAF_PINNED = 2u
};

/* One tensor to copy: a run of bytes (or rows of bytes) in host memory or
 * in one CUDA device's memory. The copy is always dense. 40 bytes. Host
 * leaves of any other layout: add the leaf, then mtc_plan_set_leaf_layout. */
typedef struct mtc_leaf {
  /* Host pointer, or CUdeviceptr, of the first byte. May be 0 when bytes is 0. */
  uint64_t address;
  /* Size of the leaf in bytes (the size of its dense copy). */
  uint64_t bytes;
  /* Non-contiguous host leaves: distance in bytes from the start of one row
   * to the next in the source. Ignored unless row_count > 1. */
  uint64_t row_pitch;
  /* MTC_DEVICE_CPU, or the CUDA device that holds address. */
  int32_t device;
  /* Bytes per element: 1, 2, 4, 8 or 16. The copy starts at a multiple. */
  uint32_t element_size;
  /* 0 or 1: contiguous. More: the leaf is row_count rows of
   * bytes / row_count bytes each, row_pitch apart in the source (host only). */
  uint32_t row_count;
  /* MTC_LEAF_* bits. */
  uint32_t flags;
} mtc_leaf;

#endif /* MTC_PUBLIC_LEAF_H */
