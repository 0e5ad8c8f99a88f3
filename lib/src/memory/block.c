/* block.c — block allocation, reference counting and the live counters. */
#include "memory/block.h"

#include <stdlib.h>

#include "base/error.h"

static atomic_uint_fast64_t blocks_live;
static atomic_uint_fast64_t device_bytes_live;
static atomic_uint_fast64_t host_bytes_live;

static mtc_block *block_alloc(mtc_block_kind kind, int32_t device,
                              uint64_t bytes) {
  mtc_block *block = calloc(1, sizeof *block);
  if (block == NULL) return NULL;
  atomic_init(&block->refs, 1);
  block->kind = kind;
  block->device = device;
  block->bytes = bytes;
  return block;
}

static void count_new(const mtc_block *block) {
  atomic_fetch_add(&blocks_live, 1);
  if (block->kind == MTC_BLOCK_DEVICE) {
    atomic_fetch_add(&device_bytes_live, block->bytes);
  } else {
    atomic_fetch_add(&host_bytes_live, block->bytes);
  }
}

mtc_status mtc_block_new_device(mtc_device *device, uint64_t bytes,
                                mtc_block **out) {
  mtc_block *block = block_alloc(MTC_BLOCK_DEVICE, device->ordinal, bytes);
  if (block == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  CUdeviceptr ptr = 0;
  mtc_status status = mtc_device_alloc(device, (size_t)bytes, &ptr);
  if (status != MTC_OK) {
    free(block);
    return status;
  }
  block->address = ptr;
  block->owner = device;
  count_new(block);
  *out = block;
  return MTC_OK;
}

mtc_status mtc_block_new_pinned(mtc_device *context_device, uint64_t bytes,
                                mtc_block **out) {
  mtc_block *block = block_alloc(MTC_BLOCK_PINNED, MTC_DEVICE_CPU, bytes);
  if (block == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  mtc_status status =
      mtc_pinned_acquire(context_device, (size_t)bytes, &block->pinned);
  if (status != MTC_OK) {
    free(block);
    return status;
  }
  block->address = (uint64_t)(uintptr_t)block->pinned.ptr;
  count_new(block);
  *out = block;
  return MTC_OK;
}

mtc_status mtc_block_new_host(uint64_t bytes, mtc_block **out) {
  mtc_block *block = block_alloc(MTC_BLOCK_HOST, MTC_DEVICE_CPU, bytes);
  void *ptr = block ? malloc(bytes ? (size_t)bytes : 1) : NULL;
  if (ptr == NULL) {
    free(block);
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                         "out of host memory (%llu bytes)",
                         (unsigned long long)bytes);
  }
  block->address = (uint64_t)(uintptr_t)ptr;
  count_new(block);
  *out = block;
  return MTC_OK;
}

void mtc_block_get_counters(mtc_block_counters *out) {
  out->blocks_live = atomic_load(&blocks_live);
  out->device_bytes_live = atomic_load(&device_bytes_live);
  out->host_bytes_live = atomic_load(&host_bytes_live);
}

MTC_API void mtc_block_retain(mtc_block *block) {
  if (block == NULL) return;
  atomic_fetch_add_explicit(&block->refs, 1, memory_order_relaxed);
}

MTC_API void mtc_block_release(mtc_block *block) {
  if (block == NULL) return;
  /* acq_rel: the thread freeing must see every other thread's use done. */
  if (atomic_fetch_sub_explicit(&block->refs, 1, memory_order_acq_rel) != 1) {
    return;
  }
  switch (block->kind) {
    case MTC_BLOCK_DEVICE:
      mtc_device_free(block->owner, (CUdeviceptr)block->address);
      atomic_fetch_sub(&device_bytes_live, block->bytes);
      break;
    case MTC_BLOCK_PINNED:
      mtc_pinned_release(&block->pinned);
      atomic_fetch_sub(&host_bytes_live, block->bytes);
      break;
    case MTC_BLOCK_HOST:
      free((void *)(uintptr_t)block->address);
      atomic_fetch_sub(&host_bytes_live, block->bytes);
      break;
  }
  atomic_fetch_sub(&blocks_live, 1);
  free(block);
}

MTC_API void mtc_block_release_callback(void *bytes, void *block) {
  (void)bytes;
  mtc_block_release((mtc_block *)block);
}

MTC_API mtc_status mtc_block_get_info(const mtc_block *block,
                                      mtc_block_info *out) {
  if (block == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_block_get_info: block and out must not be NULL");
  }
  if (out->struct_size < sizeof(mtc_block_info)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_block_get_info: out->struct_size is %u, needs "
                         "at least %zu",
                         out->struct_size, sizeof(mtc_block_info));
  }
  out->device = block->device;
  out->address = block->address;
  out->bytes = block->bytes;
  out->pinned = block->kind == MTC_BLOCK_PINNED;
  out->reserved0 = 0;
  return MTC_OK;
}
