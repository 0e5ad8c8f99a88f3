/* strided.c — simplifying an N-d layout and gathering any byte range of its
 * dense image (a staging task may start and end anywhere in a leaf). */
#include "stage/strided.h"

#include <string.h>

int mtc_strided_simplify(const mtc_leaf_layout *layout, uint32_t element_size,
                         mtc_strided *out) {
  uint64_t shape[MTC_LAYOUT_MAX_RANK], strides[MTC_LAYOUT_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t d = 0; d < layout->rank; d++) {
    if (layout->shape[d] == 1) continue; /* its stride never moves the read */
    shape[rank] = layout->shape[d];
    strides[rank] = layout->byte_strides[d];
    rank++;
  }
  /* The innermost dimensions that step by the run so far extend it. */
  uint64_t run = element_size;
  while (rank > 0 && strides[rank - 1] == run) {
    run *= shape[rank - 1];
    rank--;
  }
  if (rank == 0) return 0;
  /* Outer neighbours where one steps over all of the next merge. */
  uint32_t merged = 0;
  for (uint32_t d = 0; d < rank; d++) {
    if (merged > 0 &&
        out->byte_strides[merged - 1] == shape[d] * strides[d]) {
      out->shape[merged - 1] *= shape[d];
      out->byte_strides[merged - 1] = strides[d];
      continue;
    }
    out->shape[merged] = shape[d];
    out->byte_strides[merged] = strides[d];
    merged++;
  }
  out->rank = merged;
  out->run_bytes = run;
  return 1;
}

/* Copies n bytes, with fixed-size copies for the element-sized runs that
 * transposes and column slices are made of. */
static inline void copy_run(unsigned char *dst, const unsigned char *src,
                            uint64_t n) {
  switch (n) {
    case 1: *dst = *src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    case 16: memcpy(dst, src, 16); return;
    default: memcpy(dst, src, (size_t)n);
  }
}

void mtc_strided_gather(const mtc_strided *s, unsigned char *dst,
                        const unsigned char *src, uint64_t from, uint64_t to) {
  if (from >= to) return;
  const uint64_t run = s->run_bytes;
  const uint32_t rank = s->rank;
  uint64_t index[MTC_LAYOUT_MAX_RANK];
  /* Where `from` is: its run's index in each outer dimension. */
  uint64_t position = from / run;
  uint64_t column = from % run;
  uint64_t offset = 0;
  for (uint32_t d = rank; d-- > 0;) {
    index[d] = position % s->shape[d];
    position /= s->shape[d];
    offset += index[d] * s->byte_strides[d];
  }
  const uint32_t last = rank - 1;
  const uint64_t last_extent = s->shape[last];
  const uint64_t last_stride = s->byte_strides[last];
  while (from < to) {
    if (column == 0 && to - from >= run * (last_extent - index[last])) {
      /* The rest of the innermost outer dimension, whole runs: a tight loop. */
      const unsigned char *p = src + offset;
      for (uint64_t k = index[last]; k < last_extent; k++) {
        copy_run(dst, p, run);
        dst += run;
        p += last_stride;
      }
      from += run * (last_extent - index[last]);
      offset += last_stride * (last_extent - index[last]);
      index[last] = last_extent - 1;
    } else {
      uint64_t n = run - column;
      if (n > to - from) n = to - from;
      memcpy(dst, src + offset + column, (size_t)n);
      dst += n;
      from += n;
      if (column + n < run) return; /* ended inside a run: from == to */
      column = 0;
      offset += last_stride;
    }
    /* Next run: carry through the outer dimensions as an odometer does
     * (offset already stepped the innermost one). */
    index[last]++;
    if (index[last] < last_extent) continue;
    offset -= last_extent * last_stride;
    index[last] = 0;
    uint32_t d = last;
    while (d-- > 0) {
      offset += s->byte_strides[d];
      if (++index[d] < s->shape[d]) break;
      offset -= s->shape[d] * s->byte_strides[d];
      index[d] = 0;
    }
  }
}
