/* strided.h — the layout of a strided host leaf as the gather walks it:
 * dimensions of extent 1 dropped, neighbours that step as one merged, and
 * the contiguous innermost bytes taken as one run. */
#ifndef MTC_STAGE_STRIDED_H
#define MTC_STAGE_STRIDED_H

#include <stdint.h>

#include "mtc.h"

typedef struct mtc_strided {
  /* Outer dimensions, outermost first; 1..MTC_LAYOUT_MAX_RANK. */
  uint32_t rank;
  /* Contiguous bytes read at each outer index (element_size or more). */
  uint64_t run_bytes;
  uint64_t shape[MTC_LAYOUT_MAX_RANK];
  uint64_t byte_strides[MTC_LAYOUT_MAX_RANK];
} mtc_strided;

/* Simplifies a checked layout of elements of element_size bytes into *out.
 * Returns 0 when what is left is one contiguous run (the leaf is dense),
 * 1 when it is strided. */
int mtc_strided_simplify(const mtc_leaf_layout *layout, uint32_t element_size,
                         mtc_strided *out);

/* Copies bytes [from, to) of the dense, row-major image of the strided
 * source src to dst. */
void mtc_strided_gather(const mtc_strided *s, unsigned char *dst,
                        const unsigned char *src, uint64_t from, uint64_t to);

#endif
