/* mtc/block.h — mtc_block, the refcounted memory copies land in: retain,
 * release, info.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_BLOCK_H
#define MTC_PUBLIC_BLOCK_H

#ifndef MTC_H
#error "include mtc.h, not mtc/block.h"
#endif

/* ---------------------------------------------------------------- blocks */

/* A refcounted allocation that holds copied leaves: device memory, or host
 * memory for copies to the host. Several leaves (a packed chunk) can view
 * one block; the memory is freed when the last reference is released. */
typedef struct mtc_block mtc_block;

typedef struct mtc_block_info {
  uint32_t struct_size;
  /* MTC_DEVICE_CPU for host memory, else the CUDA device. */
  int32_t device;
  /* First byte of the block. */
  uint64_t address;
  /* Usable bytes. */
  uint64_t bytes;
  /* Nonzero when the host memory is page-locked (pinned). */
  uint32_t pinned;
  uint32_t reserved0;
} mtc_block_info;

/* Adds a reference to block. NULL is ignored. Any thread. Undefined: a
 * block whose last reference is gone. */
MTC_API void mtc_block_retain(mtc_block *block);

/* Drops a reference; the last one frees the memory (device memory in stream
 * order on the library's copy stream for that device). NULL is ignored. Any
 * thread. Work that reads the block must be finished, or ordered before
 * the library's next copy, when the last reference goes. Undefined: more
 * releases than references (the plan's own reference is the plan's to
 * drop), and any use of the block or its memory after the last one. */
MTC_API void mtc_block_release(mtc_block *block);

/* Drops a reference to the block passed as `block`; `bytes` is ignored.
 * Shaped as an external-memory deallocator, void (*)(void *bytes, void
 * *context), for runtimes that free external buffers through a C callback
 * (Bun's toArrayBuffer). Any thread. */
MTC_API void mtc_block_release_callback(void *bytes, void *block);

/* Writes what block is to *out (out->struct_size must be set). */
MTC_API mtc_status mtc_block_get_info(const mtc_block *block,
                                      mtc_block_info *out);

#endif /* MTC_PUBLIC_BLOCK_H */
