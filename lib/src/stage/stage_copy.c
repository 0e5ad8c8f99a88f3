/* stage_copy.c — byte-balanced parallel gather. The segments' bytes are laid
 * end to end and cut into equal slices, one task per slice, so one huge
 * leaf is split as well as many medium ones. */
#include "stage/stage_copy.h"

#include <string.h>

#include "stage/staging_pool.h"

/* Copies bytes [from, to) of segment's dense image (seg->begin <= from). */
static void copy_dense(const mtc_stage_segment *seg, uint64_t from,
                       uint64_t to) {
  unsigned char *dst = seg->dst + (from - seg->begin);
  if (seg->row_bytes == 0 || seg->row_pitch == seg->row_bytes) {
    memcpy(dst, seg->src + from, (size_t)(to - from));
    return;
  }
  while (from < to) {
    uint64_t row = from / seg->row_bytes;
    uint64_t column = from % seg->row_bytes;
    uint64_t n = seg->row_bytes - column;
    if (n > to - from) n = to - from;
    memcpy(dst, seg->src + row * seg->row_pitch + column, (size_t)n);
    dst += n;
    from += n;
  }
}

typedef struct slice_job {
  const mtc_stage_segment *segments;
  size_t count;
  uint64_t total;
  size_t tasks;
} slice_job;

static void run_slice(void *context, size_t task) {
  const slice_job *job = context;
  uint64_t slice_begin = job->total / job->tasks * task;
  uint64_t slice_end = task + 1 == job->tasks
                           ? job->total
                           : job->total / job->tasks * (task + 1);
  uint64_t position = 0; /* start of the current segment in the slice space */
  for (size_t i = 0; i < job->count && position < slice_end; i++) {
    const mtc_stage_segment *seg = &job->segments[i];
    uint64_t length = seg->end - seg->begin;
    uint64_t lo = slice_begin > position ? slice_begin : position;
    uint64_t hi = slice_end < position + length ? slice_end : position + length;
    if (lo < hi) {
      copy_dense(seg, seg->begin + (lo - position), seg->begin + (hi - position));
    }
    position += length;
  }
}

void mtc_stage_copy(const mtc_stage_segment *segments, size_t count,
                    unsigned max_threads) {
  uint64_t total = 0;
  for (size_t i = 0; i < count; i++) {
    total += segments[i].end - segments[i].begin;
  }
  unsigned threads = mtc_staging_pool_size();
  if (max_threads != 0 && max_threads < threads) threads = max_threads;

  if (total < MTC_STAGE_PARALLEL_MIN_BYTES || threads <= 1) {
    for (size_t i = 0; i < count; i++) {
      if (segments[i].end > segments[i].begin) {
        copy_dense(&segments[i], segments[i].begin, segments[i].end);
      }
    }
    return;
  }
  uint64_t tasks = total / MTC_STAGE_TASK_MIN_BYTES;
  if (tasks > (uint64_t)threads * MTC_STAGE_TASKS_PER_THREAD) {
    tasks = (uint64_t)threads * MTC_STAGE_TASKS_PER_THREAD;
  }
  if (tasks < 1) tasks = 1;
  slice_job job = {segments, count, total, (size_t)tasks};
  mtc_staging_parallel_for((size_t)tasks, threads, run_slice, &job);
}
