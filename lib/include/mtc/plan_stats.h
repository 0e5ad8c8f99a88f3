/* mtc/plan_stats.h — mtc_plan_stats, what one plan did, and the
 * device-to-host paths.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_PLAN_STATS_H
#define MTC_PUBLIC_PLAN_STATS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/plan_stats.h"
#endif

/* ------------------------------------------------------------ plan stats */

/* How device-to-host leaves were copied (mtc_plan_stats.device_to_host_path). */
enum {
  MTC_PATH_NONE = 0,         /* no device-to-host leaves */
  MTC_PATH_PER_LEAF = 1,     /* one copy per leaf */
  MTC_PATH_BATCHED = 2,      /* one batched driver call (not used yet) */
  MTC_PATH_GATHER_KERNEL = 3 /* one kernel per source device writes the
                                small leaves into pinned host memory */
};

/* What one plan did. */
typedef struct mtc_plan_stats {
  uint32_t struct_size;
  uint32_t device_to_host_path; /* MTC_PATH_* */
  uint64_t leaves;              /* leaves added */
  uint64_t leaves_reused;       /* already on the target: not copied */
  uint64_t leaves_packed;       /* copied as part of a chunk */
  uint64_t chunks;              /* packed chunks */
  uint64_t blocks;              /* blocks made (chunks and own leaves) */
  uint64_t bytes_copied;        /* bytes of leaves copied */
  uint64_t copies_issued;       /* DMA / kernel submissions (copies
                                   between host blocks are not counted) */
  /* Pinned buffers this plan took (staging, pinned output blocks, gather
   * tables): from the pool, or newly allocated. */
  uint64_t pinned_reuses;
  uint64_t pinned_allocations;
  uint64_t staging_ns;          /* host time spent staging (memcpy) */
  uint64_t submit_ns;           /* host time from submit to last enqueue
                                   (a background submission's wait in the
                                   queue included) */
  /* 96 bytes up to here (what earlier builds of 0.1 wrote). */
  uint64_t leaves_direct;       /* leaves read or written in place in pinned
                                   memory (MTC_RESULT_DIRECT) */
  uint64_t bytes_staged;        /* bytes memcpy'd into staging */
} mtc_plan_stats;

/* Writes the plan's stats to *out (out->struct_size must be set). Counts are
 * final once poll or wait returned MTC_OK. Before submit only `leaves` is
 * set; the layout's counts (reused, packed, chunks, bytes_copied) from
 * submit on; the submission's (the rest) once it has enqueued the copy.
 * device_to_host_path: GATHER_KERNEL when a gather kernel copied small
 * leaves to the host (large ones always take one DMA each), PER_LEAF when
 * only DMAs did. */
MTC_API mtc_status mtc_plan_get_stats(const mtc_plan *plan,
                                      mtc_plan_stats *out);

#endif /* MTC_PUBLIC_PLAN_STATS_H */
