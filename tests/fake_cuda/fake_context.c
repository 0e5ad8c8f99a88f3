/* fake_context.c — the emulated driver's devices, primary contexts (one
 * per device, refcounted; each thread has its own stack of current ones) and
 * peer access between them. */
#include "fake_cuda.h"

/* ================================================================ devices */

FAKE_API CUresult cuDeviceGetCount(int *count) {
  /* After cuInit found no device, the count (0) is still readable. */
  if (atomic_load(&g_init_state) == INIT_NO_DEVICE && count) {
    *count = 0;
    return CUDA_SUCCESS;
  }
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!count) return report(CUDA_ERROR_INVALID_VALUE, __func__, "count is NULL");
  *count = g_device_count;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!device) return report(CUDA_ERROR_INVALID_VALUE, __func__, "device is NULL");
  if (ordinal < 0 || ordinal >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "ordinal %d, there are %d devices", ordinal,
                  g_device_count);
  *device = ordinal;
  return CUDA_SUCCESS;
}

/* "Emulated GPU N" and the memory FAKE_CUDA_DEVICE_MEMORY_BYTES gives each
 * device: what a doctor or a log shows of the device. */
FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!name || len <= 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "name is NULL or len %d", len);
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  snprintf(name, (size_t)len, "Emulated GPU %d", dev);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!bytes) return report(CUDA_ERROR_INVALID_VALUE, __func__, "bytes is NULL");
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  *bytes = (size_t)g_device_mem_limit;
  return CUDA_SUCCESS;
}

/* ================================================================ contexts */

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pctx is NULL");
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  lock();
  struct fake_ctx *c = &g_ctx[dev];
  if (c->refcount++ == 0) {
    c->epoch++;
    c->null_stream.busy_until = 0;
    /* A fresh context has no peer access, and no other context has access
     * to it. */
    c->peer_mask = 0;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) g_ctx[d].peer_mask &= ~(UINT64_C(1) << dev);
  }
  unlock();
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  lock();
  struct fake_ctx *c = &g_ctx[dev];
  if (c->refcount == 0) {
    r = report(CUDA_ERROR_INVALID_CONTEXT, __func__, "device %d's primary context is not retained", dev);
  } else if (--c->refcount == 0) {
    /* The context goes away with its streams and events, as in the real
     * driver. Device allocations stay registered (and unusable) so leak
     * checks still see them. */
    int streams = 0, events = 0;
    for (uint32_t i = 0; i < g_slot_count; i++) {
      int k = g_slots[i].kind;
      if (k == KIND_STREAM && ((struct fake_stream *)g_slots[i].obj)->device == dev) {
        streams++;
        handle_drop(i);
      } else if (k == KIND_EVENT && ((struct fake_event *)g_slots[i].obj)->device == dev) {
        events++;
        handle_drop(i);
      } else if (k == KIND_MODULE && ((struct fake_module *)g_slots[i].obj)->device == dev) {
        /* Modules go with their context (functions fail the module check). */
        handle_drop(i);
      }
    }
    drop_orphan_functions();
    size_t allocs = 0;
    for (size_t i = 0; i < g_dev_allocs.n; i++) allocs += g_dev_allocs.v[i].device == dev;
    if (streams || events || allocs)
      report(CUDA_SUCCESS, __func__,
             "note: device %d's primary context released with %d streams, %d events and %zu device "
             "allocations alive",
             dev, streams, events, allocs);
  }
  unlock();
  return r;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pctx is NULL");
  *pctx = (CUcontext)current_ctx();
  return CUDA_SUCCESS;
}

/* NULL pops the stack; otherwise ctx replaces the top (or is pushed). */
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!ctx) {
    if (t_ctx_depth) t_ctx_depth--;
    return CUDA_SUCCESS;
  }
  struct fake_ctx *c;
  lock();
  r = check_ctx_handle(__func__, ctx, &c);
  unlock();
  if (r) return r;
  if (t_ctx_depth == 0) t_ctx_depth = 1;
  t_ctx_stack[t_ctx_depth - 1] = c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!ctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "ctx is NULL");
  if (t_ctx_depth == FAKE_MAX_CTX_DEPTH)
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "context stack deeper than %d: push/pop mismatch?",
                  FAKE_MAX_CTX_DEPTH);
  struct fake_ctx *c;
  lock();
  r = check_ctx_handle(__func__, ctx, &c);
  unlock();
  if (r) return r;
  t_ctx_stack[t_ctx_depth++] = c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (t_ctx_depth == 0) return report(CUDA_ERROR_INVALID_CONTEXT, __func__, "the context stack is empty");
  struct fake_ctx *c = t_ctx_stack[--t_ctx_depth];
  if (pctx) *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *device) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!device) return report(CUDA_ERROR_INVALID_VALUE, __func__, "device is NULL");
  struct fake_ctx *c;
  lock();
  r = need_ctx(__func__, &c);
  unlock();
  if (r) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

/* ============================================================ peer access */

FAKE_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!canAccessPeer) return report(CUDA_ERROR_INVALID_VALUE, __func__, "canAccessPeer is NULL");
  if (dev < 0 || dev >= g_device_count || peerDev < 0 || peerDev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "devices %d and %d, there are %d devices", dev, peerDev,
                  g_device_count);
  /* Every two distinct devices are peers here (none with FAKE_CUDA_NO_PEER,
   * as on a host whose GPUs sit behind different PCIe roots); a device is
   * not its own peer. */
  *canAccessPeer = dev != peerDev && !g_no_peer;
  return CUDA_SUCCESS;
}

/* Gives the current context access to peerContext's cuMemAlloc memory in
 * kernels. Reset when either context is next activated. */
FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (Flags != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0)", Flags);
  struct fake_ctx *c, *peer;
  lock();
  if ((r = need_ctx(__func__, &c)) || (r = check_ctx_handle(__func__, peerContext, &peer))) goto out;
  if (peer == c) {
    r = report(CUDA_ERROR_INVALID_DEVICE, __func__, "peerContext is the current context (device %d)", c->device);
  } else if (g_no_peer) {
    r = report(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, __func__,
               "device %d cannot access device %d (FAKE_CUDA_NO_PEER: cuDeviceCanAccessPeer says 0)", c->device,
               peer->device);
  } else if (c->peer_mask & (UINT64_C(1) << peer->device)) {
    /* Not an error worth a line: callers expect it on the second call. */
    r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  } else {
    c->peer_mask |= UINT64_C(1) << peer->device;
  }
out:
  unlock();
  return r;
}
