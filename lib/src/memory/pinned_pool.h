/* pinned_pool.h — a caching allocator of page-locked host memory.
 * cuMemHostAlloc costs milliseconds, so buffers are kept in power-of-two
 * size classes (from 64 KiB) and handed out again once the copy that used
 * them has completed. Memory is allocated PORTABLE: usable by every
 * context, whichever device's context was current when it was made. */
#ifndef MTC_PINNED_POOL_H
#define MTC_PINNED_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/device.h"

#define MTC_PINNED_MIN_CLASS_BYTES ((size_t)64 << 10)

typedef struct mtc_pinned_buffer {
  void *ptr;
  size_t bytes;         /* capacity: the size class */
  mtc_device *device;   /* whose context allocated it (and frees it) */
  int reused;           /* set by acquire: 1 from the pool, 0 newly allocated */
} mtc_pinned_buffer;

/* Takes a buffer of at least `bytes` (> 0) from the pool, or allocates one
 * with device's context (which this pushes as needed). */
mtc_status mtc_pinned_acquire(mtc_device *device, size_t bytes,
                              mtc_pinned_buffer *out);

/* Returns a buffer; the caller guarantees no copy still reads or writes it. */
void mtc_pinned_release(const mtc_pinned_buffer *buffer);

/* Frees every idle buffer. */
void mtc_pinned_trim(void);

typedef struct mtc_pinned_stats {
  uint64_t bytes_cached;
  uint64_t bytes_in_use;
  uint64_t allocations;
  uint64_t reuses;
} mtc_pinned_stats;

void mtc_pinned_get_stats(mtc_pinned_stats *out);

#endif
