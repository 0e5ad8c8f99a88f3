/* pinned_pool.c — free lists of pinned host buffers by size class, and the
 * limit on what the pool holds for staging (see pinned_pool.h). */
#include "memory/pinned_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"

/* Classes 64 KiB << 0 .. 64 KiB << 33 (512 TiB) cover every size we take. */
#define CLASS_COUNT 34

typedef struct idle_buffer {
  mtc_pinned_buffer buffer;
  struct idle_buffer *next;
} idle_buffer;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static idle_buffer *idle[CLASS_COUNT];
/* Guarded by pool_lock. The limit bounds staging_bytes + bytes_cached. */
static mtc_pinned_stats stats;
static pthread_once_t limit_once = PTHREAD_ONCE_INIT;

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

/* MTC_PINNED_LIMIT: decimal bytes with an optional k/m/g/t (binary)
 * suffix; 0 when unset or malformed (the default then applies). */
static uint64_t env_limit(const char *name) {
  uint64_t bytes;
  if (!mtc_parse_bytes(getenv(name), &bytes)) return 0;
  return bytes >= MTC_PINNED_MIN_LIMIT && bytes <= MTC_PINNED_MAX_LIMIT ? bytes : 0;
}

size_t mtc_pinned_class_bytes(size_t bytes) {
  size_t class_bytes;
  size_class(bytes, &class_bytes);
  return class_bytes;
}

/* The variable `name`, else a quarter of the physical memory, at most
 * `most`. */
static uint64_t initial_limit(const char *name, uint64_t most) {
  uint64_t limit = env_limit(name);
  if (limit == 0) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    limit = most;
    if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 4 < limit) {
      limit = (uint64_t)pages * (uint64_t)page / 4;
    }
    if (limit < MTC_PINNED_MIN_LIMIT) limit = MTC_PINNED_MIN_LIMIT;
  }
  return limit;
}

static void init_limit(void) {
  uint64_t limit = initial_limit("MTC_PINNED_LIMIT", MTC_PINNED_DEFAULT_MAX_LIMIT);
  uint64_t held = initial_limit("MTC_PINNED_HELD_LIMIT", MTC_PINNED_DEFAULT_MAX_HELD);
  pthread_mutex_lock(&pool_lock);
  stats.limit = limit;
  stats.held_limit = held;
  pthread_mutex_unlock(&pool_lock);
}

/* Lock held: notes a new high-water mark of staging + idle. */
static void note_high_water_locked(void) {
  uint64_t held = stats.staging_bytes + stats.bytes_cached;
  if (held > stats.high_water) stats.high_water = held;
}

/* Lock held: takes idle buffers off the lists, largest first, until
 * staging + idle + `room` fits the limit (or none is left); returns them
 * to be freed outside the lock. */
static idle_buffer *evict_locked(uint64_t room) {
  idle_buffer *evicted = NULL;
  for (int i = CLASS_COUNT - 1; i >= 0; i--) {
    while (idle[i] != NULL &&
           stats.staging_bytes + stats.bytes_cached + room > stats.limit) {
      idle_buffer *node = idle[i];
      idle[i] = node->next;
      stats.bytes_cached -= node->buffer.bytes;
      node->next = evicted;
      evicted = node;
    }
  }
  return evicted;
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

static void free_list(idle_buffer *list) {
  while (list != NULL) {
    idle_buffer *next = list->next;
    free_pinned(&list->buffer);
    free(list);
    list = next;
  }
}

/* cuMemHostAlloc with device's context; an out-of-memory answer frees the
 * idle buffers (they may be what fills pinned memory) and tries once more. */
static mtc_status allocate(mtc_device *device, size_t class_bytes, void **out) {
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, device);
  *out = NULL;
  if (status == MTC_OK) {
    CUresult r = cu->cuMemHostAlloc(out, class_bytes, CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      mtc_pinned_trim();
      r = cu->cuMemHostAlloc(out, class_bytes, CU_MEMHOSTALLOC_PORTABLE);
    }
    if (r != CUDA_SUCCESS) status = mtc_cuda_fail(r, "cuMemHostAlloc");
  }
  mtc_context_scope_end(&scope);
  return status;
}

/* Lock held: counts a buffer of `class_bytes` lent as `kind`. */
static void count_lent_locked(int kind, uint64_t class_bytes) {
  if (kind == MTC_PINNED_STAGING) {
    stats.staging_bytes += class_bytes;
    note_high_water_locked();
  } else if (kind == MTC_PINNED_HELD) {
    stats.held_bytes += class_bytes;
  } else {
    stats.output_bytes += class_bytes;
  }
  stats.bytes_in_use += class_bytes;
}

/* Lock held: the opposite of count_lent_locked. */
static void count_returned_locked(int kind, uint64_t class_bytes) {
  stats.bytes_in_use -= class_bytes;
  if (kind == MTC_PINNED_STAGING) stats.staging_bytes -= class_bytes;
  else if (kind == MTC_PINNED_HELD) stats.held_bytes -= class_bytes;
  else stats.output_bytes -= class_bytes;
}

static mtc_status acquire(mtc_device *device, size_t bytes, int kind,
                          mtc_pinned_reclaim_fn reclaim, void *context,
                          mtc_pinned_buffer *out) {
  int staging = kind == MTC_PINNED_STAGING;
  size_t class_bytes;
  int index = size_class(bytes, &class_bytes);
  if (index < 0) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                         "pinned staging buffer of %zu bytes is too large",
                         bytes);
  }
  pthread_once(&limit_once, init_limit);
  int waited = 0;
  for (;;) {
    idle_buffer *hit = NULL, *evicted = NULL;
    int reserved = 0;
    uint64_t limit, in_use;
    pthread_mutex_lock(&pool_lock);
    limit = stats.limit;
    in_use = stats.staging_bytes;
    if (staging && class_bytes > limit) {
      pthread_mutex_unlock(&pool_lock);
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                           "a pinned staging buffer of %zu bytes is larger "
                           "than the pinned pool's limit of %llu bytes",
                           class_bytes, (unsigned long long)limit);
    }
    if (kind == MTC_PINNED_HELD &&
        stats.held_bytes + class_bytes > stats.held_limit) {
      uint64_t held = stats.held_bytes, held_limit = stats.held_limit;
      pthread_mutex_unlock(&pool_lock);
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                           "%zu bytes of pinned host memory (a size class of "
                           "%zu) would pass the limit on pinned memory held "
                           "by tensors and arenas, %llu bytes, of which %llu "
                           "are held now (MTC_PINNED_HELD_LIMIT, "
                           "mtc_set_pinned_held_limit)",
                           bytes, class_bytes, (unsigned long long)held_limit,
                           (unsigned long long)held);
    }
    hit = idle[index];
    if (hit != NULL) {
      idle[index] = hit->next;
      stats.bytes_cached -= class_bytes;
      stats.reuses++;
      reserved = 1;
    } else if (!staging || in_use + stats.bytes_cached + class_bytes <= limit) {
      reserved = 1;
    } else if (stats.bytes_cached > 0) {
      evicted = evict_locked(class_bytes);
    } else if (!waited) {
      waited = 1;
      stats.limit_waits++;
    }
    if (reserved) count_lent_locked(kind, class_bytes);
    pthread_mutex_unlock(&pool_lock);

    if (hit != NULL) {
      *out = hit->buffer;
      out->reused = 1;
      out->kind = kind;
      free(hit);
      return MTC_OK;
    }
    if (reserved) {
      void *ptr;
      mtc_status status = allocate(device, class_bytes, &ptr);
      pthread_mutex_lock(&pool_lock);
      if (status == MTC_OK) {
        stats.allocations++;
      } else {
        count_returned_locked(kind, class_bytes);
      }
      pthread_mutex_unlock(&pool_lock);
      if (status != MTC_OK) return status;
      out->ptr = ptr;
      out->bytes = class_bytes;
      out->device = device;
      out->reused = 0;
      out->kind = kind;
      return MTC_OK;
    }
    if (evicted != NULL) {
      free_list(evicted);
      continue;
    }
    /* At the limit with nothing idle: lent buffers must come back. */
    if (reclaim == NULL || !reclaim(context)) {
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                           "the pinned pool is at its limit of %llu bytes "
                           "(%llu lent to copies) and no copy can give a "
                           "buffer back (MTC_PINNED_LIMIT, "
                           "mtc_set_pinned_limit)",
                           (unsigned long long)limit,
                           (unsigned long long)in_use);
    }
  }
}

mtc_status mtc_pinned_acquire_staging(mtc_device *device, size_t bytes,
                                      mtc_pinned_reclaim_fn reclaim,
                                      void *context, mtc_pinned_buffer *out) {
  return acquire(device, bytes, MTC_PINNED_STAGING, reclaim, context, out);
}

mtc_status mtc_pinned_acquire(mtc_device *device, size_t bytes, int kind,
                              mtc_pinned_buffer *out) {
  return acquire(device, bytes, kind, NULL, NULL, out);
}

void mtc_pinned_release(const mtc_pinned_buffer *buffer) {
  if (buffer == NULL || buffer->ptr == NULL) return;
  size_t class_bytes;
  int index = size_class(buffer->bytes, &class_bytes);
  idle_buffer *node = malloc(sizeof *node);
  int cached = 0;

  pthread_mutex_lock(&pool_lock);
  count_returned_locked(buffer->kind, buffer->bytes);
  if (node != NULL && index >= 0 && class_bytes == buffer->bytes &&
      stats.staging_bytes + stats.bytes_cached + buffer->bytes <= stats.limit) {
    node->buffer = *buffer;
    node->next = idle[index];
    idle[index] = node;
    stats.bytes_cached += buffer->bytes;
    note_high_water_locked();
    cached = 1;
  }
  pthread_mutex_unlock(&pool_lock);

  if (!cached) {
    /* Over the limit (or no memory for the list node): free it now. */
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
  free_list(all);
}

uint64_t mtc_pinned_limit(void) {
  pthread_once(&limit_once, init_limit);
  pthread_mutex_lock(&pool_lock);
  uint64_t limit = stats.limit;
  pthread_mutex_unlock(&pool_lock);
  return limit;
}

size_t mtc_pinned_staging_max_bytes(void) {
  uint64_t quarter = mtc_pinned_limit() / 4;
  size_t size = MTC_PINNED_MIN_CLASS_BYTES;
  while ((uint64_t)size * 2 <= quarter && size * 2 > size) size *= 2;
  return size;
}

/* MTC_OK for a limit in range, else MTC_ERR_INVALID_ARGUMENT naming `what`. */
static mtc_status check_limit(const char *what, uint64_t bytes) {
  if (bytes >= MTC_PINNED_MIN_LIMIT && bytes <= MTC_PINNED_MAX_LIMIT) return MTC_OK;
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "%s must be %llu .. %llu bytes, got %llu", what,
                       (unsigned long long)MTC_PINNED_MIN_LIMIT,
                       (unsigned long long)MTC_PINNED_MAX_LIMIT,
                       (unsigned long long)bytes);
}

mtc_status mtc_pinned_set_limit(uint64_t bytes) {
  mtc_status status = check_limit("the pinned pool's limit", bytes);
  if (status != MTC_OK) return status;
  pthread_once(&limit_once, init_limit);
  pthread_mutex_lock(&pool_lock);
  stats.limit = bytes;
  idle_buffer *evicted = evict_locked(0);
  stats.high_water = stats.staging_bytes + stats.bytes_cached;
  pthread_mutex_unlock(&pool_lock);
  free_list(evicted);
  return MTC_OK;
}

mtc_status mtc_pinned_set_held_limit(uint64_t bytes) {
  mtc_status status =
      check_limit("the limit on pinned memory held by tensors and arenas", bytes);
  if (status != MTC_OK) return status;
  pthread_once(&limit_once, init_limit);
  pthread_mutex_lock(&pool_lock);
  stats.held_limit = bytes;
  pthread_mutex_unlock(&pool_lock);
  return MTC_OK;
}

uint64_t mtc_pinned_staging_in_use(void) {
  pthread_mutex_lock(&pool_lock);
  uint64_t bytes = stats.staging_bytes;
  pthread_mutex_unlock(&pool_lock);
  return bytes;
}

void mtc_pinned_get_stats(mtc_pinned_stats *out) {
  pthread_once(&limit_once, init_limit);
  pthread_mutex_lock(&pool_lock);
  *out = stats;
  pthread_mutex_unlock(&pool_lock);
}
