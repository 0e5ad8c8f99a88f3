/* mtc/options.h — mtc_options, the knobs of one copy, and their defaults
 * (MTC_OPTIONS_INIT).
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_OPTIONS_H
#define MTC_PUBLIC_OPTIONS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/options.h"
#endif

/* ---------------------------------------------------------------- options */

typedef struct mtc_options {
  /* sizeof(mtc_options) as the caller knows it; at least 56, the size in
   * version 0.1. Later versions accept 56 too and give fields added after
   * it their defaults. */
  uint32_t struct_size;
  /* Nonzero: host leaves are staged through the pinned-memory pool so that
   * every host-to-device DMA reads pinned memory. Zero: the driver copies
   * from pageable memory directly (slower, blocks the submitting thread). */
  uint32_t use_pinned_staging;
  /* Nonzero: contiguous host leaves up to pack_threshold_bytes are packed
   * together into chunks, one DMA per chunk. */
  uint32_t pack_cpu_tensors;
  /* Nonzero: mtc_plan_submit hands staging and submission to the library's
   * background thread and returns at once. Zero: submit does that work on
   * the calling thread before it returns. */
  uint32_t use_background_thread;
  /* Each packed leaf starts at a multiple of
   * round_up(max(min_packed_alignment_bytes, element_size), element_size)
   * (6 gives 6 for 2-byte elements, 8 for 4-byte ones). 1..4096. */
  uint64_t min_packed_alignment_bytes;
  /* Most bytes in one packed chunk; a leaf larger than this gets a block of
   * its own. 1 byte .. 1 TiB. */
  uint64_t max_packed_chunk_bytes;
  /* Host leaves of at most this many bytes are packed. */
  uint64_t pack_threshold_bytes;
  /* Most staging threads this plan uses from the shared pool; 0 = all. */
  uint32_t staging_threads;
  uint32_t reserved0;
  /* Unpacked host leaves are staged through pinned memory in pieces of this
   * many bytes, staging piece k+1 while piece k is in flight. >= 4096. */
  uint64_t staging_piece_bytes;
} mtc_options;

/* The defaults, the same as accvlab's multi_tensor_copier where it has them. */
#define MTC_OPTIONS_INIT                                                   \
  {                                                                        \
    (uint32_t)sizeof(mtc_options), 1u, 1u, 1u, 16u, (uint64_t)32 << 20,    \
        (uint64_t)256 << 10, 0u, 0u, (uint64_t)8 << 20                     \
  }

/* Fills *options with MTC_OPTIONS_INIT, for callers that cannot use the
 * macro (FFI). */
MTC_API void mtc_options_init(mtc_options *options);

#endif /* MTC_PUBLIC_OPTIONS_H */
