/* fake_registry.c — the emulated driver's registries: handles (streams,
 * events, pools, modules, functions) and allocations (device and pinned),
 * and the checks every call shares. */
#include "fake_cuda.h"

/* ========================================================= handle registry */

struct slot *g_slots;
uint32_t g_slot_count;
static uint32_t g_slot_cap;
static uint32_t g_free_slot = NO_SLOT;
int g_live[KIND_COUNT];

/* Registers obj; returns its handle, or 0 when the table is full. */
uintptr_t handle_new(int kind, void *obj) {
  uint32_t i;
  if (g_free_slot != NO_SLOT) {
    i = g_free_slot;
    g_free_slot = g_slots[i].next_free;
  } else {
    if (g_slot_count == H_MAX_SLOTS) return 0;
    if (g_slot_count == g_slot_cap) {
      uint32_t cap = g_slot_cap ? g_slot_cap * 2 : 64;
      struct slot *s = realloc(g_slots, (size_t)cap * sizeof *s);
      if (!s) return 0;
      g_slots = s;
      g_slot_cap = cap;
    }
    i = g_slot_count++;
    g_slots[i].gen = 1;
  }
  g_slots[i].obj = obj;
  g_slots[i].kind = kind;
  g_live[kind]++;
  return ((uintptr_t)kind << H_KIND_SHIFT) |
         ((uintptr_t)(g_slots[i].gen & H_GEN_MASK) << H_IDX_BITS) | (uintptr_t)(i + 1);
}

/* The object behind handle h of the given kind, or NULL. Writes its slot. */
void *handle_get(int kind, const void *h, uint32_t *out_slot) {
  uintptr_t v = (uintptr_t)h;
  if ((v >> H_KIND_SHIFT) != (uintptr_t)kind) return NULL;
  uint32_t i = (uint32_t)(v & H_IDX_MASK);
  if (i == 0 || i > g_slot_count) return NULL;
  i--;
  if (g_slots[i].kind != kind || (g_slots[i].gen & H_GEN_MASK) != ((v >> H_IDX_BITS) & H_GEN_MASK))
    return NULL;
  if (out_slot) *out_slot = i;
  return g_slots[i].obj;
}

/* Frees the object in slot i and makes its handle stale. */
void handle_drop(uint32_t i) {
  g_live[g_slots[i].kind]--;
  free(g_slots[i].obj);
  g_slots[i].obj = NULL;
  g_slots[i].kind = 0;
  g_slots[i].gen++;
  g_slots[i].next_free = g_free_slot;
  g_free_slot = i;
}

/* ===================================================== allocation registry */

/* Index of the first allocation that starts above addr. */
static size_t alloc_upper(const struct alloc_list *l, uintptr_t addr) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->v[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The allocation that holds byte p, or NULL. */
struct fake_alloc *alloc_containing(struct alloc_list *l, uintptr_t p) {
  size_t i = alloc_upper(l, p);
  if (i == 0) return NULL;
  struct fake_alloc *a = &l->v[i - 1];
  return p - a->addr < a->size ? a : NULL;
}

/* An allocation that overlaps [p, p + n), n > 0, or NULL. */
struct fake_alloc *alloc_overlapping(struct alloc_list *l, uintptr_t p, size_t n) {
  uintptr_t last = n - 1 > UINTPTR_MAX - p ? UINTPTR_MAX : p + (n - 1);
  size_t i = alloc_upper(l, last);
  if (i == 0) return NULL;
  struct fake_alloc *a = &l->v[i - 1];
  return a->addr + a->size > p ? a : NULL;
}

int alloc_insert(struct alloc_list *l, const struct fake_alloc *a) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    struct fake_alloc *v = realloc(l->v, cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  size_t i = alloc_upper(l, a->addr);
  memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *a);
  l->v[i] = *a;
  l->n++;
  return 0;
}

void alloc_remove(struct alloc_list *l, struct fake_alloc *a) {
  size_t i = (size_t)(a - l->v);
  memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *a);
  l->n--;
}

/* Poisons, then frees, so that use after free reads 0xDB bytes. */
void poison_free(uintptr_t addr, size_t size) {
  memset((void *)addr, 0xDB, size);
  free((void *)addr);
}

/* ============================================================ common checks */

CUresult need_init(const char *fn) {
  if (atomic_load(&g_init_state) == INIT_OK) return CUDA_SUCCESS;
  return report(CUDA_ERROR_NOT_INITIALIZED, fn, "cuInit(0) has not succeeded");
}

/* The context behind a CUcontext handle, or NULL. */
struct fake_ctx *ctx_from_handle(CUcontext h) {
  uintptr_t v = (uintptr_t)h, base = (uintptr_t)g_ctx;
  if (v < base || v >= base + (uintptr_t)g_device_count * sizeof g_ctx[0]) return NULL;
  if ((v - base) % sizeof g_ctx[0] != 0) return NULL;
  return &g_ctx[(v - base) / sizeof g_ctx[0]];
}

struct fake_ctx *current_ctx(void) {
  return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL;
}

/* Lock held. The calling thread's current, active context. */
CUresult need_ctx(const char *fn, struct fake_ctx **out) {
  struct fake_ctx *c = current_ctx();
  if (!c) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "no current context on this thread");
  if (c->refcount == 0)
    return report(CUDA_ERROR_INVALID_CONTEXT, fn,
                  "the current context (device %d) was released by cuDevicePrimaryCtxRelease",
                  c->device);
  *out = c;
  return CUDA_SUCCESS;
}

int is_null_stream(CUstream h) {
  uintptr_t v = (uintptr_t)h;
  return v == 0 || v == FAKE_STREAM_LEGACY || v == FAKE_STREAM_PER_THREAD;
}

/* Lock held. Resolves h (NULL: cur's default stream). With same_ctx the
 * stream must belong to cur's device. */
CUresult get_stream(const char *fn, CUstream h, struct fake_ctx *cur, int same_ctx,
                           struct fake_stream **out) {
  if (is_null_stream(h)) {
    if (!cur) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "the NULL stream needs a current context");
    *out = &cur->null_stream;
    return CUDA_SUCCESS;
  }
  struct fake_stream *s = handle_get(KIND_STREAM, h, NULL);
  if (!s)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "stream %p is not a live stream (destroyed or never created)",
                  (void *)h);
  if (same_ctx && s->device != cur->device)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "stream belongs to device %d, current context is device %d",
                  s->device, cur->device);
  *out = s;
  return CUDA_SUCCESS;
}

/* Lock held. Same as get_stream for events (never NULL). */
CUresult get_event(const char *fn, CUevent h, struct fake_ctx *cur, struct fake_event **out,
                          uint32_t *out_slot) {
  struct fake_event *e = handle_get(KIND_EVENT, h, out_slot);
  if (!e)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "event %p is not a live event (destroyed or never created)",
                  (void *)h);
  if (cur && e->device != cur->device)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "event belongs to device %d, current context is device %d",
                  e->device, cur->device);
  *out = e;
  return CUDA_SUCCESS;
}

/* Lock held. [p, p + n), n > 0, must lie inside one live allocation of device. */
CUresult check_device_range(const char *fn, const char *what, CUdeviceptr p, size_t n,
                                   int device) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (!a) {
    if (alloc_containing(&g_host_allocs, (uintptr_t)p))
      return report(CUDA_ERROR_INVALID_VALUE, fn,
                    "%s 0x%llx (%zu bytes) is pinned host memory, not a device allocation", what, p, n);
    return report(CUDA_ERROR_INVALID_VALUE, fn, "%s 0x%llx (%zu bytes) is not inside any live device allocation",
                  what, p, n);
  }
  if (a->device != device)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx (%zu bytes) is memory of device %d, the copy needs device %d", what, p, n,
                  a->device, device);
  size_t room = a->size - (size_t)((uintptr_t)p - a->addr);
  if (n > room)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx (%zu bytes) runs %zu bytes past the end of its allocation 0x%" PRIxPTR
                  " (%zu bytes)",
                  what, p, n, n - room, a->addr, a->size);
  if (a->epoch != g_ctx[device].epoch)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx was allocated before device %d's primary context was last released", what, p,
                  device);
  return CUDA_SUCCESS;
}

/* Lock held. The host side of a copy, n > 0: not NULL and not device memory
 * (a swapped argument would otherwise pass, device memory being host memory
 * here). *pinned says whether it lies inside one cuMemHostAlloc block. */
CUresult check_host_range(const char *fn, const char *what, const void *h, size_t n, int *pinned) {
  if (!h) return report(CUDA_ERROR_INVALID_VALUE, fn, "%s host pointer is NULL (%zu bytes)", what, n);
  struct fake_alloc *d = alloc_overlapping(&g_dev_allocs, (uintptr_t)h, n);
  if (d)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s host range %p (%zu bytes) overlaps device %d allocation 0x%" PRIxPTR
                  " (%zu bytes): a device pointer passed as host pointer?",
                  what, h, n, d->device, d->addr, d->size);
  struct fake_alloc *a = alloc_containing(&g_host_allocs, (uintptr_t)h);
  *pinned = a && n <= a->size - (size_t)((uintptr_t)h - a->addr);
  return CUDA_SUCCESS;
}

/* Lock held. Queues one copy on s. Returns the time the caller must sleep
 * until (a copy with pageable host memory blocks), or 0. */
uint64_t stream_enqueue_copy(struct fake_stream *s, int blocking) {
  s->busy_until = max_u64(s->busy_until, now_ns()) + g_copy_delay_ns;
  g_copy_count++;
  if (!blocking) return 0;
  g_pageable_copy_count++;
  return s->busy_until;
}

/* Lock held. ctx must be a primary context that is retained. */
CUresult check_ctx_handle(const char *fn, CUcontext ctx, struct fake_ctx **out) {
  struct fake_ctx *c = ctx_from_handle(ctx);
  if (!c) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "%p is not a context", (void *)ctx);
  if (c->refcount == 0)
    return report(CUDA_ERROR_INVALID_CONTEXT, fn, "device %d's primary context is not retained", c->device);
  *out = c;
  return CUDA_SUCCESS;
}
