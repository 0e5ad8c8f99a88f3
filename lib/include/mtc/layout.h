/* mtc/layout.h — mtc_leaf_layout: a strided host leaf's shape and byte
 * strides.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_LAYOUT_H
#define MTC_PUBLIC_LAYOUT_H

#ifndef MTC_H
#error "include mtc.h, not mtc/layout.h"
#endif

/* ---------------------------------------------------------- leaf layouts */

/* Most dimensions of an mtc_leaf_layout. */
#define MTC_LAYOUT_MAX_RANK 8

/* Where the elements of a strided host leaf are: element (i0, ..., iN-1)
 * is the element_size bytes at leaf.address + sum(ik * byte_strides[k]).
 * Any such layout: transposed, sliced with steps, broadcast (stride 0),
 * overlapping. The copy is the leaf's elements in row-major order, dense,
 * as for any other leaf, and a strided leaf is packed, staged and split
 * over the staging threads as a contiguous leaf of the same bytes is.
 * 136 bytes. */
typedef struct mtc_leaf_layout {
  /* sizeof(mtc_leaf_layout) as the caller knows it: 136 in version 0.1. */
  uint32_t struct_size;
  /* Dimensions used: 1..MTC_LAYOUT_MAX_RANK. */
  uint32_t rank;
  /* Extent of each dimension, outermost first. Their product times the
   * leaf's element_size is the leaf's bytes. */
  uint64_t shape[MTC_LAYOUT_MAX_RANK];
  /* Bytes from one element to the next along each dimension. */
  uint64_t byte_strides[MTC_LAYOUT_MAX_RANK];
} mtc_leaf_layout;

/* Gives leaf `index` of the plan (a host leaf, row_count 0 or 1) the
 * layout *layout; NULL gives it back its contiguous layout. Only before
 * submit (MTC_ERR_INVALID_STATE after). A second call replaces the first.
 * MTC_ERR_INVALID_ARGUMENT, naming the leaf, for an index out of range, a
 * rank out of range, a shape whose elements are not the leaf's bytes, and
 * a layout that reaches past the end of the address space;
 * MTC_ERR_UNSUPPORTED for a leaf on a CUDA device or with rows. A layout
 * that turns out contiguous (its strides are those of its shape) makes the
 * leaf contiguous.
 *
 * Ownership: the plan copies *layout; it need not outlive the call. Every
 * byte the layout reaches is read by the copy and must stay valid and
 * unchanged until the copy has finished, as for mtc_plan_add_leaf (the
 * library cannot check that the layout stays inside the caller's memory).
 * A copy to MTC_DEVICE_CPU copies a strided leaf (it reuses contiguous host
 * leaves). Threads: as every call on a plan. */
MTC_API mtc_status mtc_plan_set_leaf_layout(mtc_plan *plan, uint64_t index,
                                            const mtc_leaf_layout *layout);

#endif /* MTC_PUBLIC_LAYOUT_H */
