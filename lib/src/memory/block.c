/* block.c — block allocation, reference counting and the live counters. */
#include "memory/block.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The live pinned blocks, sorted by address: host memory that copies may
 * read and write in place. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mtc_block **registry;
static size_t registry_count, registry_capacity;

/* Lock held: index of the first block whose address is >= address. */
static size_t registry_lower_bound(uint64_t address) {
  size_t lo = 0, hi = registry_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (registry[mid]->address < address) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int registry_add(mtc_block *block) {
  pthread_mutex_lock(&registry_lock);
  if (registry_count == registry_capacity) {
    size_t grown = registry_capacity ? registry_capacity * 2 : 16;
    mtc_block **more = realloc(registry, grown * sizeof *more);
    if (more == NULL) {
      pthread_mutex_unlock(&registry_lock);
      return -1;
    }
    registry = more;
    registry_capacity = grown;
  }
  size_t at = registry_lower_bound(block->address);
  memmove(&registry[at + 1], &registry[at],
          (registry_count - at) * sizeof *registry);
  registry[at] = block;
  registry_count++;
  pthread_mutex_unlock(&registry_lock);
  return 0;
}

static void registry_remove(mtc_block *block) {
  pthread_mutex_lock(&registry_lock);
  size_t at = registry_lower_bound(block->address);
  while (at < registry_count && registry[at] != block) at++;
  if (at < registry_count) {
    memmove(&registry[at], &registry[at + 1],
            (registry_count - at - 1) * sizeof *registry);
    registry_count--;
  }
  pthread_mutex_unlock(&registry_lock);
}

mtc_block *mtc_block_find_pinned(uint64_t address, uint64_t bytes) {
  mtc_block *found = NULL;
  pthread_mutex_lock(&registry_lock);
  size_t at = registry_lower_bound(address + 1);
  if (at > 0) {
    mtc_block *block = registry[at - 1];
    if (mtc_block_holds(block, address, bytes)) {
      /* A block whose last reference is going is being freed: not found. */
      uint_fast64_t refs = atomic_load(&block->refs);
      while (refs > 0 && !atomic_compare_exchange_weak(&block->refs, &refs,
                                                       refs + 1)) {
      }
      if (refs > 0) found = block;
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

static pthread_mutex_t uses_lock = PTHREAD_MUTEX_INITIALIZER;

/* Lock held: drops the completion events of uses that are over. */
static void prune_uses_locked(mtc_block *block) {
  size_t kept = 0;
  for (size_t i = 0; i < block->use_count; i++) {
    mtc_event *event = block->uses[i];
    if (mtc_event_query(event) == MTC_IN_PROGRESS) {
      block->uses[kept++] = event;
    } else {
      mtc_event_release(event);
    }
  }
  block->use_count = kept;
}

void mtc_block_use_begin(mtc_block *block) {
  atomic_fetch_add(&block->pending, 1);
}

void mtc_block_use_end(mtc_block *block, mtc_event *completion) {
  if (completion != NULL) {
    pthread_mutex_lock(&uses_lock);
    prune_uses_locked(block);
    if (block->use_count == block->use_capacity) {
      size_t grown = block->use_capacity ? block->use_capacity * 2 : 4;
      mtc_event **more = realloc(block->uses, grown * sizeof *more);
      if (more != NULL) {
        block->uses = more;
        block->use_capacity = grown;
      }
    }
    if (block->use_count < block->use_capacity) {
      mtc_event_retain(completion);
      block->uses[block->use_count++] = completion;
    } else {
      /* No memory to remember it: wait for it instead of forgetting it. */
      mtc_event_synchronize(completion);
    }
    pthread_mutex_unlock(&uses_lock);
  }
  atomic_fetch_sub(&block->pending, 1);
}

mtc_status mtc_block_order_after_uses(mtc_block *block, CUstream stream) {
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  pthread_mutex_lock(&uses_lock);
  prune_uses_locked(block);
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < block->use_count && r == CUDA_SUCCESS; i++) {
    r = cu->cuStreamWaitEvent(stream, block->uses[i]->event, 0);
  }
  pthread_mutex_unlock(&uses_lock);
  if (r != CUDA_SUCCESS) {
    return mtc_cuda_fail(r, "cuStreamWaitEvent (after the copies that used a pinned block)");
  }
  return MTC_OK;
}

void mtc_block_copy_out_begin(mtc_block *block) {
  atomic_fetch_add(&block->copy_outs, 1);
}

void mtc_block_copy_out_end(mtc_block *block) {
  atomic_fetch_sub(&block->copy_outs, 1);
}

/* The event of the last use recorded on the block, retained, or NULL. */
static mtc_event *last_use(mtc_block *block) {
  pthread_mutex_lock(&uses_lock);
  prune_uses_locked(block);
  mtc_event *last = block->use_count > 0 ? block->uses[block->use_count - 1] : NULL;
  if (last != NULL) mtc_event_retain(last);
  pthread_mutex_unlock(&uses_lock);
  return last;
}

mtc_status mtc_block_wait_uses(mtc_block *block) {
  /* The last use recorded was ordered after the earlier ones
   * (mtc_block_order_after_uses), so one wait usually covers all; the loop
   * makes sure none is left in progress. */
  for (;;) {
    mtc_event *last = last_use(block);
    if (last == NULL) return MTC_OK;
    mtc_status status = mtc_event_synchronize(last);
    mtc_event_release(last);
    if (status != MTC_OK) return status;
  }
}

MTC_API int32_t mtc_block_busy(mtc_block *block) {
  if (block == NULL || block->kind != MTC_BLOCK_PINNED) return 0;
  if (atomic_load(&block->pending) > 0 || atomic_load(&block->copy_outs) > 0) return 1;
  pthread_mutex_lock(&uses_lock);
  prune_uses_locked(block);
  int32_t busy = block->use_count > 0 || atomic_load(&block->pending) > 0 ||
                 atomic_load(&block->copy_outs) > 0;
  pthread_mutex_unlock(&uses_lock);
  return busy;
}

MTC_API mtc_status mtc_block_wait_idle(mtc_block *block) {
  if (block == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_block_wait_idle: block must not be NULL");
  }
  if (block->kind != MTC_BLOCK_PINNED) return MTC_OK;
  for (;;) {
    /* Submitted copies record their completion within their submission. */
    while (atomic_load(&block->pending) > 0) {
      struct timespec pause = {0, 20 * 1000};
      nanosleep(&pause, NULL);
    }
    mtc_status status = mtc_block_wait_uses(block);
    if (status != MTC_OK) return status;
    if (!mtc_block_busy(block)) return MTC_OK;
    if (atomic_load(&block->pending) == 0 && atomic_load(&block->copy_outs) > 0) {
      /* Only a poll or wait of that copy's caller ends it: waiting here
       * could wait for this very thread. */
      return mtc_error_set(MTC_IN_PROGRESS,
                           "mtc_block_wait_idle: a copy into host memory still "
                           "reads or writes the block: its caller's "
                           "mtc_plan_poll or mtc_plan_wait (or its release) "
                           "ends that");
    }
  }
}

mtc_status mtc_block_new_pinned(mtc_device *context_device, uint64_t bytes,
                                int kind, mtc_block **out) {
  mtc_block *block = block_alloc(MTC_BLOCK_PINNED, MTC_DEVICE_CPU, bytes);
  if (block == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  mtc_status status =
      mtc_pinned_acquire(context_device, (size_t)bytes, kind, &block->pinned);
  if (status != MTC_OK) {
    free(block);
    return status;
  }
  block->address = (uint64_t)(uintptr_t)block->pinned.ptr;
  if (registry_add(block) != 0) {
    mtc_pinned_release(&block->pinned);
    free(block);
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
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
      registry_remove(block);
      /* Its last reference is gone, so no copy uses it any more. */
      for (size_t i = 0; i < block->use_count; i++) {
        mtc_event_release(block->uses[i]);
      }
      free(block->uses);
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
