/* mtc/stats.h — the library's counters and its pools: trim, the pinned
 * limit, warm-up.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_STATS_H
#define MTC_PUBLIC_STATS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/stats.h"
#endif

/* ----------------------------------------------------------------- stats */

/* Library-wide counters, for tests, benchmarks and leak checks. */
typedef struct mtc_stats {
  uint32_t struct_size;
  uint32_t staging_threads;      /* size of the shared staging pool */
  uint64_t plans_live;           /* plans created and not yet released */
  uint64_t blocks_live;          /* blocks not yet freed (host and device) */
  uint64_t device_bytes_live;    /* bytes in live device blocks */
  uint64_t host_bytes_live;      /* bytes in live host blocks */
  uint64_t pinned_bytes_cached;  /* pinned bytes idle in the pool */
  uint64_t pinned_bytes_in_use;  /* pinned bytes lent out: staging of copies
                                    in flight and pinned host blocks */
  uint64_t pinned_allocations;   /* cuMemHostAlloc calls so far */
  uint64_t pinned_reuses;        /* pool hits so far */
  uint64_t pinned_limit_bytes;   /* the limit on staging + idle (see
                                    mtc_set_pinned_limit); an older libmtc
                                    writes 0 here */
  /* 80 bytes up to here (the size in version 0.1). */
  uint64_t pinned_staging_bytes; /* pinned staging lent to copies now */
  uint64_t pinned_output_bytes;  /* pinned host blocks (outputs) held now:
                                    not limited */
  uint64_t pinned_high_water_bytes; /* most staging + idle at once since the
                                       limit was last set */
  uint64_t pinned_limit_waits;   /* staging requests that found the pool at
                                    its limit and waited */
  /* 112 bytes up to here (what earlier builds of 0.1 wrote). */
  uint64_t pinned_held_bytes;    /* pinned memory held by the caller
                                    (mtc_host_block_alloc) now */
  uint64_t pinned_held_limit_bytes; /* its limit */
} mtc_stats;

/* Writes the counters to *out. out->struct_size must be set, to at least
 * 80 (the size in version 0.1, which gets the fields up to pinned_reuses)
 * or to sizeof(mtc_stats). Any thread. */
MTC_API mtc_status mtc_get_stats(mtc_stats *out);

/* Frees idle pinned staging memory held by the pool. Any thread. */
MTC_API void mtc_trim_pools(void);

/* The pinned pool's limit. Page-locked memory is a machine-wide resource,
 * so the pinned memory the pool holds for staging (buffers lent to copies
 * in flight, and idle buffers kept for reuse) never exceeds this many
 * bytes. A staging request at the limit frees idle buffers, then waits for
 * copies in flight to give theirs back (it ends copies that are over even
 * if nobody polls them, and a copy that needs more than the limit goes
 * through it a piece at a time: each staging buffer takes at most a quarter
 * of the limit). Pinned host outputs (blocks of copies to the host, which
 * their owner may keep) are not limited: staging never waits for them.
 * Default: a quarter of the physical memory, at most 2 GiB; the environment
 * variable MTC_PINNED_LIMIT (bytes, with an optional k, m, g or t suffix:
 * KiB ... TiB), read once at first use, replaces it (a malformed or
 * out-of-range value is ignored: mtc_get_stats shows the limit in force).
 * Sets the limit (1 MiB .. 1 PiB, else MTC_ERR_INVALID_ARGUMENT) for copies
 * submitted from now on, frees idle buffers above it, and restarts the
 * high-water mark. Any thread. */
MTC_API mtc_status mtc_set_pinned_limit(uint64_t bytes);

/* Prepares device for its first copy, so that copy does not pay for what is
 * otherwise set up on first use: the device's context, copy stream, memory
 * pool and kernels; `pinned_bytes` of pinned staging memory in buffers of
 * `pinned_buffer_bytes` each (rounded up to the pool's size classes: pass
 * the stagingPieceBytes of the copies to come; 0 means 8 MiB), kept idle in
 * the pool within its limit; and `device_bytes` allocated once from the
 * device's pool and given back, so that the pool holds that much. The first
 * cuMemHostAlloc of 4 MB alone costs milliseconds. Pinned buffers already
 * idle count towards pinned_bytes; at the pool's limit it stops early and
 * returns MTC_OK (mtc_get_stats says what is cached). MTC_ERR_NO_DRIVER or
 * MTC_ERR_NO_DEVICE as for a copy; MTC_ERR_OUT_OF_MEMORY when an allocation
 * fails (what was reserved before stays). Any thread. */
MTC_API mtc_status mtc_warm_up(int32_t device, uint64_t pinned_bytes,
                               uint64_t pinned_buffer_bytes,
                               uint64_t device_bytes);

#endif /* MTC_PUBLIC_STATS_H */
