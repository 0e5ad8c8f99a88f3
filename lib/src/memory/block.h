/* block.h — mtc_block: a refcounted allocation holding copied leaves. A
 * packed chunk is one block viewed by many leaves; the memory goes back when
 * the last reference is dropped. */
#ifndef MTC_BLOCK_H
#define MTC_BLOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuda/device.h"
#include "cuda/event.h"
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
  /* PINNED: copies submitted that read or write the block and have not
   * recorded their completion on it yet, and the completion events of
   * those that did and may still run (see mtc_block_busy). `uses` and its
   * counts are guarded by a lock in block.c. `copy_outs`: copies whose
   * device work is over but whose caller's poll or wait still reads or
   * writes the block on the host (a copy into host destinations). */
  atomic_int pending;
  atomic_int copy_outs;
  mtc_event **uses;
  size_t use_count, use_capacity;
};

/* Each returns a block with one reference. DEVICE needs the device's
 * context current (the allocation is ordered on its copy stream). */
mtc_status mtc_block_new_device(mtc_device *device, uint64_t bytes,
                                mtc_block **out);
/* kind: MTC_PINNED_OUTPUT (a copy's host output) or MTC_PINNED_HELD (the
 * caller's: pinned tensors and arenas). Either can be found by address. */
mtc_status mtc_block_new_pinned(mtc_device *context_device, uint64_t bytes,
                                int kind, mtc_block **out);
mtc_status mtc_block_new_host(uint64_t bytes, mtc_block **out);

typedef struct mtc_block_counters {
  uint64_t blocks_live;
  uint64_t device_bytes_live;
  uint64_t host_bytes_live;
} mtc_block_counters;

void mtc_block_get_counters(mtc_block_counters *out);

/* Does block hold all of [address, address + bytes)? */
static inline int mtc_block_holds(const mtc_block *block, uint64_t address,
                                  uint64_t bytes) {
  return address >= block->address && bytes <= block->bytes &&
         address - block->address <= block->bytes - bytes;
}

/* The live pinned block that holds all of [address, address + bytes), with
 * one new reference, or NULL. Any thread. */
mtc_block *mtc_block_find_pinned(uint64_t address, uint64_t bytes);

/* A copy that reads or writes pinned `block` was submitted (use_begin) and
 * has enqueued its work, whose end `completion` marks (use_end; NULL when
 * it enqueued nothing, or failed and waited for what it had enqueued).
 * mtc_block_busy is 1 from the first to the completion. */
void mtc_block_use_begin(mtc_block *block);
void mtc_block_use_end(mtc_block *block, mtc_event *completion);

/* A copy whose caller's poll or wait reads or writes pinned `block` on the
 * host after the copy's device work (its copy-out): busy from copy_out_begin
 * (called before that copy's use_end) to copy_out_end (the copy-out ran, or
 * the copy was released without it). */
void mtc_block_copy_out_begin(mtc_block *block);
void mtc_block_copy_out_end(mtc_block *block);

/* Waits on the host for the copies that used pinned `block` and recorded
 * their completion on it: the host may then read or write it after them
 * (staging a leaf in it, a copy-out into it). Copies still submitting are
 * not waited for (the caller's own use is one of them). */
mtc_status mtc_block_wait_uses(mtc_block *block);

/* Makes `stream` wait (on the GPU) for every copy that used pinned `block`
 * and whose completion is recorded but not reached: a later copy that reads
 * or writes the block in place then does so after the earlier ones, in
 * submission order, whichever device's stream each ran on. */
mtc_status mtc_block_order_after_uses(mtc_block *block, CUstream stream);

#endif
