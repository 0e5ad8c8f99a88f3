/* stage_copy.c — byte-balanced parallel gather. The segments' bytes are laid
 * end to end and cut into equal slices, one task per slice, so one huge
 * leaf is split as well as many medium ones. */
#include "stage/stage_copy.h"

#include <string.h>

#if defined(__x86_64__) && !defined(MTC_STAGE_PLAIN_MEMCPY)
#include <emmintrin.h>
#define MTC_STAGE_STREAMING 1
#endif

#include "stage/staging_pool.h"

/* Ranges of 64 KiB and more, in a staging call of at most 4 MiB, are
 * written with non-temporal (streaming) stores: staged bytes are read next
 * by the DMA engine, not by this CPU, so bringing the destination's lines
 * into the cache first (what plain stores do) only adds memory traffic.
 * Measured on an H100 host (docs/BENCHMARKS.md): a mixed batch of 2 MB and
 * small leaves staged twice as fast; 8 MiB pieces of 16 MiB leaves, whose
 * sources come from memory rather than the cache, staged slower, so large
 * staging calls keep plain stores. */
#define MTC_STAGE_STREAMING_MIN_BYTES ((uint64_t)64 << 10)
#define MTC_STAGE_STREAMING_MAX_CALL_BYTES ((uint64_t)4 << 20)

static void copy_range(unsigned char *dst, const unsigned char *src, size_t n,
                       int streaming) {
#ifdef MTC_STAGE_STREAMING
  if (streaming && n >= MTC_STAGE_STREAMING_MIN_BYTES) {
    size_t head = (size_t)(-(uintptr_t)dst & 63);
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
      __m128i a = _mm_loadu_si128((const __m128i *)src);
      __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
      __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
      __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
      _mm_stream_si128((__m128i *)dst, a);
      _mm_stream_si128((__m128i *)(dst + 16), b);
      _mm_stream_si128((__m128i *)(dst + 32), c);
      _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    /* Streaming stores are weakly ordered: drain them before the hand-off
     * that lets the DMA read these bytes. */
    _mm_sfence();
    return;
  }
#else
  (void)streaming;
#endif
  memcpy(dst, src, n);
}

/* Copies bytes [from, to) of segment's dense image (seg->begin <= from). */
static void copy_dense(const mtc_stage_segment *seg, uint64_t from,
                       uint64_t to, int streaming) {
  unsigned char *dst = seg->dst + (from - seg->begin);
  if (seg->strided != NULL) {
    mtc_strided_gather(seg->strided, dst, seg->src, from, to);
    return;
  }
  if (seg->row_bytes == 0 || seg->row_pitch == seg->row_bytes) {
    copy_range(dst, seg->src + from, (size_t)(to - from), streaming);
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
  int streaming;
  /* Per task: the first segment its slice touches, and where that segment
   * starts in the slice space (found in one pass, not by every task). */
  size_t *first;
  uint64_t *position;
} slice_job;

static uint64_t slice_start(const slice_job *job, size_t task) {
  return task == job->tasks ? job->total : job->total / job->tasks * task;
}

static void run_slice(void *context, size_t task) {
  const slice_job *job = context;
  uint64_t slice_begin = slice_start(job, task);
  uint64_t slice_end = slice_start(job, task + 1);
  uint64_t position = job->position[task];
  for (size_t i = job->first[task]; i < job->count && position < slice_end; i++) {
    const mtc_stage_segment *seg = &job->segments[i];
    uint64_t length = seg->end - seg->begin;
    uint64_t lo = slice_begin > position ? slice_begin : position;
    uint64_t hi = slice_end < position + length ? slice_end : position + length;
    if (lo < hi) {
      copy_dense(seg, seg->begin + (lo - position), seg->begin + (hi - position),
                 job->streaming);
    }
    position += length;
  }
}

/* Fills job->first and job->position: the segment where each slice starts. */
static void find_slice_starts(slice_job *job) {
  size_t i = 0;
  uint64_t position = 0;
  for (size_t task = 0; task < job->tasks; task++) {
    uint64_t begin = slice_start(job, task);
    while (i < job->count &&
           position + (job->segments[i].end - job->segments[i].begin) <= begin) {
      position += job->segments[i].end - job->segments[i].begin;
      i++;
    }
    job->first[task] = i;
    job->position[task] = position;
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

  int streaming = total <= MTC_STAGE_STREAMING_MAX_CALL_BYTES;
  if (total < MTC_STAGE_PARALLEL_MIN_BYTES || threads <= 1) {
    for (size_t i = 0; i < count; i++) {
      if (segments[i].end > segments[i].begin) {
        copy_dense(&segments[i], segments[i].begin, segments[i].end, streaming);
      }
    }
    return;
  }
  uint64_t tasks = total / MTC_STAGE_TASK_MIN_BYTES;
  if (tasks > (uint64_t)threads * MTC_STAGE_TASKS_PER_THREAD) {
    tasks = (uint64_t)threads * MTC_STAGE_TASKS_PER_THREAD;
  }
  if (tasks < 1) tasks = 1;
  size_t first[MTC_STAGE_TASKS_PER_THREAD * MTC_STAGE_MAX_THREADS];
  uint64_t position[MTC_STAGE_TASKS_PER_THREAD * MTC_STAGE_MAX_THREADS];
  if (tasks > sizeof first / sizeof first[0]) tasks = sizeof first / sizeof first[0];
  slice_job job = {segments, count, total, (size_t)tasks, streaming, first, position};
  find_slice_starts(&job);
  mtc_staging_parallel_for((size_t)tasks, threads, run_slice, &job);
}
