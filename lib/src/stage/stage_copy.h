/* stage_copy.h — gathering host leaves (contiguous or strided rows) into
 * dense staging memory, split over the staging pool when there is enough
 * to copy. */
#ifndef MTC_STAGE_COPY_H
#define MTC_STAGE_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "stage/strided.h"

/* Copies bytes [begin, end) of a leaf's dense image to dst. The dense image
 * of a row leaf is its rows of row_bytes, read row_pitch apart; that of an
 * N-d strided leaf its elements in row-major order (stage/strided.h). */
typedef struct mtc_stage_segment {
  unsigned char *dst;
  const unsigned char *src; /* the leaf's first byte */
  uint64_t begin;
  uint64_t end;
  uint64_t row_bytes; /* 0 for contiguous leaves */
  uint64_t row_pitch;
  const mtc_strided *strided; /* N-d layout, or NULL */
} mtc_stage_segment;

/* Below this many bytes in all, staging runs on the calling thread only:
 * handing tasks out costs more than it saves. */
#define MTC_STAGE_PARALLEL_MIN_BYTES ((uint64_t)256 << 10)
/* Smallest share of one staging task. */
#define MTC_STAGE_TASK_MIN_BYTES ((uint64_t)64 << 10)
/* Tasks per staging thread, at most: more, smaller tasks than threads, so
 * that a thread that starts late or runs slow holds the others up less. */
#define MTC_STAGE_TASKS_PER_THREAD 4
/* Threads one staging call hands tasks to, at most (the pool may be larger). */
#define MTC_STAGE_MAX_THREADS 64

/* Performs every segment's copy, using up to max_threads staging threads
 * (0 = all). Returns when all bytes are in place. */
void mtc_stage_copy(const mtc_stage_segment *segments, size_t count,
                    unsigned max_threads);

#endif
