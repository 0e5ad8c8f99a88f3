/* pinned_pool.h — a caching allocator of page-locked host memory, with a
 * limit. cuMemHostAlloc costs milliseconds, so buffers are kept in
 * power-of-two size classes (from 64 KiB) and handed out again once the copy
 * that used them has completed. Memory is allocated PORTABLE: usable by every
 * context, whichever device's context was current when it was made.
 *
 * Page-locked memory is a machine-wide resource, so what the pool holds for
 * staging (buffers lent to copies in flight, and idle buffers kept for
 * reuse) never exceeds the limit: a staging request at the limit first frees
 * idle buffers, then waits for lent ones to come back (the caller's reclaim
 * function gets them back), and fails only when none can. Pinned host
 * outputs (blocks of copies to the host, which their owner may hold
 * indefinitely) are counted apart and not limited: staging that waited for
 * them could wait forever. */
#ifndef MTC_PINNED_POOL_H
#define MTC_PINNED_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/device.h"

#define MTC_PINNED_MIN_CLASS_BYTES ((size_t)64 << 10)

/* The limit's range, and its default: a quarter of the physical memory, at
 * most MTC_PINNED_DEFAULT_MAX_LIMIT. MTC_PINNED_LIMIT (bytes, with an
 * optional k/m/g/t suffix) replaces the default, read once. */
#define MTC_PINNED_MIN_LIMIT ((uint64_t)1 << 20)
#define MTC_PINNED_MAX_LIMIT ((uint64_t)1 << 50)
#define MTC_PINNED_DEFAULT_MAX_LIMIT ((uint64_t)2 << 30)
/* The default limit on pinned memory the caller holds (pinned tensors and
 * arenas): a quarter of the physical memory, at most this;
 * MTC_PINNED_HELD_LIMIT replaces it. */
#define MTC_PINNED_DEFAULT_MAX_HELD ((uint64_t)8 << 30)

/* What a buffer is lent for: each kind is counted apart. */
enum {
  MTC_PINNED_OUTPUT = 0,  /* a pinned host output of a copy: not limited */
  MTC_PINNED_STAGING = 1, /* staging of copies in flight: the pool's limit */
  MTC_PINNED_HELD = 2     /* held by the caller (mtc_host_block_alloc): its own limit */
};

typedef struct mtc_pinned_buffer {
  void *ptr;
  size_t bytes;         /* capacity: the size class */
  mtc_device *device;   /* whose context allocated it (and frees it) */
  int reused;           /* set by acquire: 1 from the pool, 0 newly allocated */
  int kind;             /* set by acquire: MTC_PINNED_OUTPUT, _STAGING or _HELD */
} mtc_pinned_buffer;

/* Called by a staging request that finds the pool at its limit with no idle
 * buffer to free: gets lent buffers back (completes copies that are over,
 * waits for one, ...). Returns 1 when the request should look again, 0 when
 * nothing can come back (the request then fails). */
typedef int (*mtc_pinned_reclaim_fn)(void *context);

/* A buffer of at least `bytes` (> 0) for staging, counted against the
 * limit: from the pool, or allocated with device's context (pushed as
 * needed). At the limit it calls reclaim(context) until room appears;
 * MTC_ERR_OUT_OF_MEMORY when reclaim gives up, or when `bytes` rounds up to
 * more than the limit. The current context may change. */
mtc_status mtc_pinned_acquire_staging(mtc_device *device, size_t bytes,
                                      mtc_pinned_reclaim_fn reclaim,
                                      void *context, mtc_pinned_buffer *out);

/* A buffer for a pinned host output (kind MTC_PINNED_OUTPUT: not limited)
 * or for the caller to hold (MTC_PINNED_HELD: MTC_ERR_OUT_OF_MEMORY past
 * the held limit), counted apart from staging. */
mtc_status mtc_pinned_acquire(mtc_device *device, size_t bytes, int kind,
                              mtc_pinned_buffer *out);

/* Returns a buffer; the caller guarantees no copy still reads or writes it.
 * It is kept for reuse while the limit allows, else freed. */
void mtc_pinned_release(const mtc_pinned_buffer *buffer);

/* The size class (capacity) a request of `bytes` gets. */
size_t mtc_pinned_class_bytes(size_t bytes);

/* Frees every idle buffer. */
void mtc_pinned_trim(void);

/* The limit in force, and the largest staging buffer one request should
 * take so that a copy never needs the whole limit at once: a quarter of
 * the limit, rounded down to a size class. */
uint64_t mtc_pinned_limit(void);
size_t mtc_pinned_staging_max_bytes(void);

/* Sets the limit (MTC_PINNED_MIN_LIMIT .. MTC_PINNED_MAX_LIMIT, else
 * MTC_ERR_INVALID_ARGUMENT) and restarts the high-water mark from what the
 * pool holds now. Idle buffers above the new limit are freed; lent ones
 * count until they come back. */
mtc_status mtc_pinned_set_limit(uint64_t bytes);

/* Staging bytes lent out now. */
uint64_t mtc_pinned_staging_in_use(void);

/* Sets the limit on pinned memory held by the caller (same range as the
 * pool's limit); buffers held already stay. */
mtc_status mtc_pinned_set_held_limit(uint64_t bytes);

typedef struct mtc_pinned_stats {
  uint64_t bytes_cached;   /* idle */
  uint64_t bytes_in_use;   /* staging + outputs */
  uint64_t allocations;
  uint64_t reuses;
  uint64_t limit;
  uint64_t staging_bytes;  /* lent to copies */
  uint64_t output_bytes;   /* held by pinned host outputs */
  uint64_t high_water;     /* most staging + idle at once since the limit was set */
  uint64_t limit_waits;    /* staging requests that found the pool at its limit */
  uint64_t held_bytes;     /* held by the caller (pinned tensors, arenas) */
  uint64_t held_limit;
} mtc_pinned_stats;

void mtc_pinned_get_stats(mtc_pinned_stats *out);

#endif
