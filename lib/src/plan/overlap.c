/* overlap.c — at submit, for a plan of copies into existing memory: no
 * destination may share a byte with another destination, nor with any
 * leaf's source on the same device (its own or another leaf's).
 *
 * Why refuse rather than order: a gather or scatter launch writes every
 * destination of a chunk at once, so a destination that is another leaf's
 * source would be read before or after it is written depending on which
 * thread block runs first. Refusing before anything is copied is the one
 * rule that every path (kernels, DMAs, peer copies, host copies) keeps. */
#include <stdlib.h>

#include "plan/phase.h"
#include "plan/validate.h"

/* A byte range [begin, end) of leaf `leaf`'s source or destination. */
typedef struct span {
  uint64_t begin;
  uint64_t end;
  uint64_t leaf;
} span;

static int compare_spans(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  /* Equal starts: the earlier leaf first, so the later one is named. */
  if (x->leaf != y->leaf) return x->leaf < y->leaf ? -1 : 1;
  return 0;
}

uint64_t mtc_plan_source_extent(const mtc_plan *plan, uint64_t i) {
  const mtc_leaf *leaf = &plan->leaves[i];
  const mtc_strided *strided = mtc_plan_leaf_strided(plan, i);
  if (strided != NULL) {
    uint64_t reach = strided->run_bytes;
    for (uint32_t d = 0; d < strided->rank; d++) {
      reach += (strided->shape[d] - 1) * strided->byte_strides[d];
    }
    return reach;
  }
  if (leaf->row_count <= 1) return leaf->bytes;
  uint64_t row_bytes = leaf->bytes / leaf->row_count;
  return leaf->row_pitch * (leaf->row_count - 1) + row_bytes;
}

/* Destinations sorted by start: two overlap when one starts before the
 * furthest end of those before it. */
static mtc_status check_destinations_apart(const span *dst, uint64_t n,
                                           int64_t *leaf) {
  uint64_t reach = 0, reacher = 0; /* furthest end so far, and whose */
  for (uint64_t k = 0; k < n; k++) {
    if (k > 0 && dst[k].begin < reach) {
      uint64_t i = dst[k].leaf;
      uint64_t later = i > reacher ? i : reacher;
      uint64_t earlier = i > reacher ? reacher : i;
      *leaf = (int64_t)later;
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: its destination overlaps the "
                           "destination of leaf %llu",
                           (unsigned long long)later,
                           (unsigned long long)earlier);
    }
    if (k == 0 || dst[k].end > reach) {
      reach = dst[k].end;
      reacher = dst[k].leaf;
    }
  }
  return MTC_OK;
}

/* Destinations sorted and apart (so their ends rise too), sources sorted by
 * start: a destination meets a source when, of the sources that start
 * before its end, the one reaching furthest reaches past its start. */
static mtc_status check_sources_apart(const span *dst, uint64_t n,
                                      const span *src, uint64_t m,
                                      int64_t *leaf) {
  uint64_t k = 0, reach = 0, reacher = 0;
  for (uint64_t d = 0; d < n; d++) {
    for (; k < m && src[k].begin < dst[d].end; k++) {
      if (src[k].end > reach) {
        reach = src[k].end;
        reacher = src[k].leaf;
      }
    }
    if (reach <= dst[d].begin) continue;
    uint64_t i = dst[d].leaf;
    *leaf = (int64_t)i;
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: its destination overlaps the source of "
                         "leaf %llu (copyInto reads every source before it "
                         "may write any destination: use separate memory)",
                         (unsigned long long)i, (unsigned long long)reacher);
  }
  return MTC_OK;
}

mtc_status mtc_plan_find_overlap(const mtc_plan *plan, int64_t *bad) {
  *bad = -1;
  const mtc_leaf *dst = plan->destinations;
  if (dst == NULL) return MTC_OK;
  /* Destinations laid out in leaf order (the results of one copy, the
   * usual case) need no sort; sources on another device (host -> GPU, the
   * usual case) need no comparison. */
  uint64_t n = 0, m = 0, end = 0;
  int ordered = 1;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    if (dst[i].bytes > 0) {
      if (dst[i].address < end) ordered = 0;
      end = dst[i].address + dst[i].bytes;
      n++;
    }
    const mtc_leaf *source = &plan->leaves[i];
    if (source->bytes == 0 || source->device != plan->target) continue;
    m++;
    /* Its own source first: the plainest message. */
    uint64_t begin = source->address;
    uint64_t reach = begin + mtc_plan_source_extent(plan, i);
    if (dst[i].address < reach && begin < dst[i].address + dst[i].bytes) {
      *bad = (int64_t)i;
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: its destination overlaps the leaf "
                           "itself",
                           (unsigned long long)i);
    }
  }
  if (ordered && m == 0) return MTC_OK;

  span *spans = malloc((size_t)(n + m ? n + m : 1) * sizeof *spans);
  if (spans == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  span *dst_spans = spans, *src_spans = spans + n;
  uint64_t a = 0, b = 0;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    if (dst[i].bytes > 0) {
      dst_spans[a++] = (span){dst[i].address, dst[i].address + dst[i].bytes, i};
    }
    const mtc_leaf *source = &plan->leaves[i];
    if (source->bytes > 0 && source->device == plan->target) {
      src_spans[b++] = (span){source->address,
                              source->address + mtc_plan_source_extent(plan, i), i};
    }
  }
  if (!ordered) qsort(dst_spans, (size_t)n, sizeof *spans, compare_spans);
  mtc_status status = check_destinations_apart(dst_spans, n, bad);
  if (status == MTC_OK && m > 0) {
    qsort(src_spans, (size_t)m, sizeof *spans, compare_spans);
    status = check_sources_apart(dst_spans, n, src_spans, m, bad);
  }
  free(spans);
  return status;
}

mtc_status mtc_plan_check_destinations(mtc_plan *plan) {
  int64_t leaf;
  mtc_status status = mtc_plan_find_overlap(plan, &leaf);
  return status == MTC_OK ? MTC_OK : mtc_plan_fail_submit(plan, status, leaf);
}
