/* fake_memory.c — the emulated driver's memory: pinned host memory, device
 * memory (host memory counted against each device's limit), memory pools
 * and the access other devices have to a pool. */
#include "fake_cuda.h"

/* ========================================================== pinned memory */

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pp) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pp is NULL");
  /* PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4, and 8. */
  if (Flags > 15) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags 0x%x", Flags);
  if (bytesize == 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "bytesize is 0");
  struct fake_ctx *c;
  lock();
  if ((r = need_ctx(__func__, &c))) goto out;
  if (g_pinned_limit && bytesize > g_pinned_limit - g_pinned_used) {
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__,
               "%zu bytes asked, %" PRIu64 " of %" PRIu64 " pinned bytes in use (FAKE_CUDA_PINNED_MEMORY_BYTES)",
               bytesize, g_pinned_used, g_pinned_limit);
    goto out;
  }
  /* Page aligned like real pinned memory; C11 wants a multiple of the alignment. */
  void *p = bytesize <= SIZE_MAX - 4095 ? aligned_alloc(4096, (bytesize + 4095) & ~(size_t)4095) : NULL;
  struct fake_alloc a = {(uintptr_t)p, bytesize, -1, 0, 0};
  if (!p || alloc_insert(&g_host_allocs, &a)) {
    free(p);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "host allocation of %zu bytes failed", bytesize);
    goto out;
  }
  memset(p, 0xCD, bytesize); /* never zero, like fresh real memory may be */
  g_pinned_used += bytesize;
  *pp = p;
out:
  unlock();
  return r;
}

FAKE_API CUresult cuMemFreeHost(void *p) {
  CUresult r = need_init(__func__);
  if (r) return r;
  lock();
  struct fake_alloc *a = alloc_containing(&g_host_allocs, (uintptr_t)p);
  if (!a || a->addr != (uintptr_t)p) {
    if (a)
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p points inside pinned block 0x%" PRIxPTR ", not at its start",
                 p, a->addr);
    else if (alloc_containing(&g_dev_allocs, (uintptr_t)p))
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p is device memory (use cuMemFree)", p);
    else
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p is not a live cuMemHostAlloc block (double free?)", p);
  } else {
    uintptr_t addr = a->addr;
    size_t size = a->size;
    g_pinned_used -= size;
    alloc_remove(&g_host_allocs, a);
    race_forget(addr, size);
    poison_free(addr, size);
  }
  unlock();
  return r;
}

/* ========================================================== device memory */

/* Lock held. Allocates size bytes on device, counted against its limit and
 * the pool's (when pool is not NULL). */
static CUresult device_alloc(const char *fn, int device, size_t size, struct fake_pool *pool,
                             uintptr_t pool_handle, CUdeviceptr *out) {
  struct fake_ctx *d = &g_ctx[device];
  if (size == 0) return report(CUDA_ERROR_INVALID_VALUE, fn, "bytesize is 0");
  if (size > g_device_mem_limit - d->used_bytes)
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn,
                  "device %d: %zu bytes asked, %" PRIu64 " of %" PRIu64
                  " bytes in use (FAKE_CUDA_DEVICE_MEMORY_BYTES)",
                  device, size, d->used_bytes, g_device_mem_limit);
  if (pool && pool->max_size && size > pool->max_size - pool->used)
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn,
                  "pool of device %d: %zu bytes asked, %" PRIu64 " of maxSize %" PRIu64 " in use", device, size,
                  pool->used, pool->max_size);
  void *p = size <= SIZE_MAX - 255 ? aligned_alloc(256, (size + 255) & ~(size_t)255) : NULL;
  struct fake_alloc a = {(uintptr_t)p, size, device, d->epoch, pool_handle};
  if (!p || alloc_insert(&g_dev_allocs, &a)) {
    free(p);
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "host allocation of %zu bytes failed", size);
  }
  memset(p, 0xCD, size); /* uninitialized device memory is not zero */
  d->used_bytes += size;
  if (pool) pool->used += size;
  *out = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* Lock held. Frees the allocation starting at p; device >= 0: it must be
 * memory of that device. */
static CUresult device_free(const char *fn, CUdeviceptr p, int device) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (!a || a->addr != (uintptr_t)p) {
    if (a)
      return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx points inside allocation 0x%" PRIxPTR ", not at its start",
                    p, a->addr);
    if (alloc_containing(&g_host_allocs, (uintptr_t)p))
      return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is pinned host memory (use cuMemFreeHost)", p);
    return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is not a live device allocation (double free?)", p);
  }
  if (device >= 0 && a->device != device)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is memory of device %d, the stream is on device %d", p,
                  a->device, device);
  g_ctx[a->device].used_bytes -= a->size;
  struct fake_pool *pool = a->pool ? handle_get(KIND_POOL, (void *)a->pool, NULL) : NULL;
  if (pool) pool->used -= a->size;
  uintptr_t addr = a->addr;
  size_t size = a->size;
  alloc_remove(&g_dev_allocs, a);
  poison_free(addr, size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!dptr) return report(CUDA_ERROR_INVALID_VALUE, __func__, "dptr is NULL");
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) r = device_alloc(__func__, c->device, bytesize, NULL, 0, dptr);
  unlock();
  return r;
}

/* Memory of any device, with or without a current context. */
FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult r = need_init(__func__);
  if (r) return r;
  lock();
  r = device_free(__func__, dptr, -1);
  unlock();
  return r;
}

/* ============================================================ memory pools */

FAKE_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!pool || !poolProps) return report(CUDA_ERROR_INVALID_VALUE, fn, "pool or poolProps is NULL");
  const CUmemPoolProps *p = poolProps;
  if (p->allocType != 1)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "allocType %d (want 1, CU_MEM_ALLOCATION_TYPE_PINNED)",
                  p->allocType);
  /* NONE 0, POSIX_FILE_DESCRIPTOR 1, FABRIC 8; the win32 kinds do not exist on Linux. */
  if (p->handleTypes & ~(1 | 8))
    return report(CUDA_ERROR_INVALID_VALUE, fn, "handleTypes 0x%x", (unsigned)p->handleTypes);
  if (p->location.type != 1)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "location.type %d (want 1, CU_MEM_LOCATION_TYPE_DEVICE)",
                  p->location.type);
  if (p->location.id < 0 || p->location.id >= g_device_count)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "location.id %d, there are %d devices", p->location.id,
                  g_device_count);
  if (p->usage != 0 && p->usage != 2) return report(CUDA_ERROR_INVALID_VALUE, fn, "usage 0x%x", p->usage);
  /* Nonzero reserved bytes usually mean the struct was not zeroed. */
  for (size_t i = 0; i < sizeof p->reserved; i++)
    if (p->reserved[i])
      return report(CUDA_ERROR_INVALID_VALUE, fn, "reserved[%zu] is %u, must be 0 (struct not zeroed?)", i,
                    p->reserved[i]);
  struct fake_pool *pl = calloc(1, sizeof *pl);
  if (!pl) return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  pl->device = p->location.id;
  pl->max_size = p->maxSize;
  pl->access[pl->device] = 3;
  lock();
  uintptr_t h = handle_new(KIND_POOL, pl);
  unlock();
  if (!h) {
    free(pl);
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "no room for another pool");
  }
  *pool = (CUmemoryPool)h;
  return CUDA_SUCCESS;
}

/* Allocations still out live on (and stay freeable), as in the real driver. */
FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_POOL, pool, &slot))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
  else
    handle_drop(slot);
  unlock();
  return r;
}

/* Attributes 1..8 (CU_MEMPOOL_ATTR_*). 5 and 7 (RESERVED_MEM_CURRENT,
 * USED_MEM_CURRENT) are read-only; 6 and 8 (the high marks) only reset to 0. */
FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (attr < 1 || attr > 8) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d (want 1..8)", attr);
  if (!value) return report(CUDA_ERROR_INVALID_VALUE, __func__, "value is NULL");
  if (attr == 5 || attr == 7) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d is read-only", attr);
  if (attr == 6 || attr == 8) {
    uint64_t v;
    memcpy(&v, value, sizeof v);
    if (v != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d can only be reset to 0", attr);
  }
  lock();
  if (!handle_get(KIND_POOL, pool, NULL))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
  unlock();
  return r;
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                          CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!dptr) return report(CUDA_ERROR_INVALID_VALUE, __func__, "dptr is NULL");
  struct fake_ctx *c;
  struct fake_stream *s;
  lock();
  if ((r = need_ctx(__func__, &c)) || (r = get_stream(__func__, hStream, c, 1, &s))) goto out;
  struct fake_pool *pl = handle_get(KIND_POOL, pool, NULL);
  if (!pl) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
    goto out;
  }
  if (pl->device != s->device) {
    r = report(CUDA_ERROR_INVALID_VALUE, __func__, "pool belongs to device %d, stream to device %d", pl->device,
               s->device);
    goto out;
  }
  r = device_alloc(__func__, pl->device, bytesize, pl, (uintptr_t)pool, dptr);
out:
  unlock();
  return r;
}

/* Frees at once (stricter than stream order: later use fails at once). */
FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)))
    r = device_free(__func__, dptr, s->device);
  unlock();
  return r;
}

/* ====================================================== pool access */

/* Validates every entry before applying any. The owner keeps READWRITE. */
FAKE_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!map) return report(CUDA_ERROR_INVALID_VALUE, fn, "map is NULL (count %zu)", count);
  lock();
  struct fake_pool *pl = handle_get(KIND_POOL, pool, NULL);
  if (!pl) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
    goto out;
  }
  for (size_t i = 0; i < count && !r; i++) {
    const CUmemAccessDesc *d = &map[i];
    if (d->location.type != 1)
      r = report(CUDA_ERROR_INVALID_VALUE, fn, "map[%zu].location.type %d (want 1, CU_MEM_LOCATION_TYPE_DEVICE)", i,
                 d->location.type);
    else if (d->location.id < 0 || d->location.id >= g_device_count)
      r = report(CUDA_ERROR_INVALID_DEVICE, fn, "map[%zu].location.id %d, there are %d devices", i, d->location.id,
                 g_device_count);
    else if (d->flags != 0 && d->flags != 1 && d->flags != 3)
      r = report(CUDA_ERROR_INVALID_VALUE, fn, "map[%zu].flags %d (want 0, 1 or 3: CU_MEM_ACCESS_FLAGS_PROT_*)", i,
                 d->flags);
    else if (d->location.id == pl->device && d->flags != 3)
      r = report(CUDA_ERROR_INVALID_VALUE, fn,
                 "map[%zu] takes access away from the pool's own device %d (flags %d)", i, pl->device, d->flags);
    else if (d->location.id != pl->device && d->flags != 0 && g_no_peer)
      r = report(CUDA_ERROR_INVALID_DEVICE, fn,
                 "map[%zu]: device %d cannot access device %d's pool (FAKE_CUDA_NO_PEER: no two devices are peers)",
                 i, d->location.id, pl->device);
  }
  if (!r)
    for (size_t i = 0; i < count; i++) pl->access[map[i].location.id] = (unsigned char)map[i].flags;
out:
  unlock();
  return r;
}
