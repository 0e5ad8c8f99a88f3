/* pinned_pool.c — free lists of pinned host buffers by size class. */
#include "memory/pinned_pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"

/* Classes 64 KiB << 0 .. 64 KiB << 33 (512 TiB) cover every size we take. */
#define CLASS_COUNT 34

typedef struct idle_buffer {
  mtc_pinned_buffer buffer;
  struct idle_buffer *next;
} idle_buffer;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static idle_buffer *idle[CLASS_COUNT];
static mtc_pinned_stats stats;

static int size_class(size_t bytes, size_t *class_bytes) {
  size_t size = MTC_PINNED_MIN_CLASS_BYTES;
  int index = 0;
  while (size < bytes && index < CLASS_COUNT - 1) {
    size <<= 1;
    index++;
  }
  *class_bytes = size;
  return size >= bytes ? index : -1;
}

static void free_pinned(const mtc_pinned_buffer *buffer) {
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK) return;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  if (mtc_context_scope_use(&scope, buffer->device) == MTC_OK) {
    cu->cuMemFreeHost(buffer->ptr);
  }
  mtc_context_scope_end(&scope);
}

mtc_status mtc_pinned_acquire(mtc_device *device, size_t bytes,
                              mtc_pinned_buffer *out) {
  size_t class_bytes;
  int index = size_class(bytes, &class_bytes);
  if (index < 0) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                         "pinned staging buffer of %zu bytes is too large",
                         bytes);
  }

  pthread_mutex_lock(&pool_lock);
  idle_buffer *hit = idle[index];
  if (hit != NULL) {
    idle[index] = hit->next;
    stats.bytes_cached -= class_bytes;
    stats.bytes_in_use += class_bytes;
    stats.reuses++;
  }
  pthread_mutex_unlock(&pool_lock);
  if (hit != NULL) {
    *out = hit->buffer;
    out->reused = 1;
    free(hit);
    return MTC_OK;
  }

  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;

  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, device);
  void *ptr = NULL;
  if (status == MTC_OK) {
    CUresult r = cu->cuMemHostAlloc(&ptr, class_bytes, CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      /* Idle buffers of other classes may be what fills pinned memory. */
      mtc_pinned_trim();
      r = cu->cuMemHostAlloc(&ptr, class_bytes, CU_MEMHOSTALLOC_PORTABLE);
    }
    if (r != CUDA_SUCCESS) status = mtc_cuda_fail(r, "cuMemHostAlloc");
  }
  mtc_context_scope_end(&scope);
  if (status != MTC_OK) return status;

  pthread_mutex_lock(&pool_lock);
  stats.bytes_in_use += class_bytes;
  stats.allocations++;
  pthread_mutex_unlock(&pool_lock);

  out->ptr = ptr;
  out->bytes = class_bytes;
  out->device = device;
  out->reused = 0;
  return MTC_OK;
}

void mtc_pinned_release(const mtc_pinned_buffer *buffer) {
  if (buffer == NULL || buffer->ptr == NULL) return;
  size_t class_bytes;
  int index = size_class(buffer->bytes, &class_bytes);
  idle_buffer *node = malloc(sizeof *node);
  int cached = 0;

  pthread_mutex_lock(&pool_lock);
  stats.bytes_in_use -= buffer->bytes;
  if (node != NULL && index >= 0 && class_bytes == buffer->bytes) {
    node->buffer = *buffer;
    node->next = idle[index];
    idle[index] = node;
    stats.bytes_cached += buffer->bytes;
    cached = 1;
  }
  pthread_mutex_unlock(&pool_lock);

  if (!cached) {
    /* No memory for the list node: free the buffer now instead. */
    free(node);
    free_pinned(buffer);
  }
}

void mtc_pinned_trim(void) {
  idle_buffer *all = NULL;
  pthread_mutex_lock(&pool_lock);
  for (int i = 0; i < CLASS_COUNT; i++) {
    while (idle[i] != NULL) {
      idle_buffer *node = idle[i];
      idle[i] = node->next;
      node->next = all;
      all = node;
    }
  }
  stats.bytes_cached = 0;
  pthread_mutex_unlock(&pool_lock);

  /* Free outside the lock: cuMemFreeHost can take a while. */
  while (all != NULL) {
    idle_buffer *next = all->next;
    free_pinned(&all->buffer);
    free(all);
    all = next;
  }
}

void mtc_pinned_get_stats(mtc_pinned_stats *out) {
  pthread_mutex_lock(&pool_lock);
  *out = stats;
  pthread_mutex_unlock(&pool_lock);
}
