/* block.h — mtc_block: a refcounted allocation holding copied leaves. A
 * packed chunk is one block viewed by many leaves; the memory goes back when
 * the last reference is dropped. */
#ifndef MTC_BLOCK_H
#define MTC_BLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuda/device.h"
#include "mtc.h"
#include "memory/pinned_pool.h"

typedef enum mtc_block_kind {
  MTC_BLOCK_DEVICE = 1, /* from the device's stream-ordered pool */
  MTC_BLOCK_PINNED = 2, /* pinned host memory from the pinned pool */
  MTC_BLOCK_HOST = 3    /* malloc'd host memory */
} mtc_block_kind;

struct mtc_block {
  atomic_uint_fast64_t refs;
  mtc_block_kind kind;
  int32_t device; /* MTC_DEVICE_CPU for host kinds */
  uint64_t address;
  uint64_t bytes; /* usable bytes (what was asked for) */
  mtc_device *owner;        /* DEVICE: whose pool and stream */
  mtc_pinned_buffer pinned; /* PINNED: the pool buffer */
};

/* Each returns a block with one reference. DEVICE needs the device's
 * context current (the allocation is ordered on its copy stream). */
mtc_status mtc_block_new_device(mtc_device *device, uint64_t bytes,
                                mtc_block **out);
mtc_status mtc_block_new_pinned(mtc_device *context_device, uint64_t bytes,
                                mtc_block **out);
mtc_status mtc_block_new_host(uint64_t bytes, mtc_block **out);

typedef struct mtc_block_counters {
  uint64_t blocks_live;
  uint64_t device_bytes_live;
  uint64_t host_bytes_live;
} mtc_block_counters;

void mtc_block_get_counters(mtc_block_counters *out);

#endif
