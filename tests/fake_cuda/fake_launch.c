/* fake_launch.c — cuLaunchKernel: the kernels of libmtc's cuda/ and two PTX
 * kernels run on the host, every byte range they touch checked first as a
 * GPU would reach it (see below); launches of other PTX kernels
 * recorded (fake_cuda_last_launch). */
#include "fake_cuda.h"

/* ================================================================ kernels
 * The kernels of libmtc's cuda/ directory, known by name, run on the host by
 * cuLaunchKernel. Their parameters (kernelParams[i] points at parameter i),
 * as the .cu files declare them:
 *
 *   mtc_copy_segments(const mtc_segment *table, uint32_t n)
 *       mtc_segment is {uint64_t src, dst, bytes} (24 bytes): copies each
 *       segment's bytes from src to dst.
 *   mtc_debug_fill(uint8_t *dst, uint64_t bytes, uint32_t value, uint32_t spin_us)
 *       spins spin_us microseconds, then sets bytes bytes at dst to value.
 *   mtc_debug_copy(uint8_t *dst, const uint8_t *src, uint64_t bytes)
 *   mtc_scatter_segments(const uint8_t *base, const mtc_segment *table, uint32_t n)
 *       n segments at table, each copying bytes from base + src to dst.
 *
 * Every range a kernel touches (bytes > 0) must lie in one live device
 * allocation of the launching device, of a peer it was given access to
 * (cuCtxEnablePeerAccess, or cuMemPoolSetAccess for pool memory), or in one
 * pinned host block; source and destination of one copy must not overlap.
 * A failed check fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS (the real
 * driver would report it later, from a synchronize) and nothing is written.
 * A launch costs its stream FAKE_CUDA_COPY_DELAY_US like a copy, plus the
 * fill's spin. */

/* Kernels of PTX modules (the caller's own, through mtc_module_load). Each
 * launch is recorded: grid, block, shared bytes, stream and the bytes of
 * each parameter as the .entry declares its size (fake_cuda_last_launch).
 * One is also run on the host:
 *
 *   add_one_f32(float *p, uint32_t n)
 *       adds 1 to p[i] for each i < n that the grid covers
 *       (i < gridDim.x * blockDim.x), as a one-thread-per-element kernel.
 *   scale_add_f32(const float *x, float *y, float a, float b, uint32_t n)
 *       y[i] = a * x[i] + b, likewise.
 *
 * Any other .entry name only records. */

/* The last PTX launch (lock held to touch). */
struct fake_last_launch g_last_launch;

/* Lock held. Records a PTX kernel's launch (see g_last_launch). */
static CUresult record_ptx_launch(const char *fn, const struct fake_function *f, const unsigned int dims[7],
                                  uintptr_t stream, void **params) {
  unsigned int bytes = 0;
  for (int i = 0; i < f->param_count; i++) {
    if (!params[i]) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams[%d] is NULL", i);
    bytes += f->param_sizes[i];
  }
  if (bytes > sizeof g_last_launch.params)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "%u bytes of parameters (the emulation records at most %zu)", bytes,
                  sizeof g_last_launch.params);
  unsigned int at = 0;
  for (int i = 0; i < f->param_count; i++) {
    memcpy(g_last_launch.params + at, params[i], f->param_sizes[i]);
    at += f->param_sizes[i];
  }
  memcpy(g_last_launch.dims, dims, 7 * sizeof dims[0]);
  g_last_launch.dims[7] = (unsigned int)f->param_count;
  g_last_launch.stream = stream;
  g_last_launch.bytes = bytes;
  g_last_launch.valid = 1;
  return CUDA_SUCCESS;
}

struct fake_segment {
  uint64_t src, dst, bytes;
};

_Static_assert(sizeof(struct fake_segment) == 24, "mtc_segment is 24 bytes");

/* Lock held. [p, p + n), n > 0, as a kernel on device sees it (see above). */
static CUresult check_kernel_range(const char *fn, const char *what, uint64_t p, uint64_t n, int device,
                                   int write) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (a) {
    uint64_t room = a->size - (p - a->addr);
    if (n > room)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " (%" PRIu64 " bytes) runs %" PRIu64
                    " bytes past the end of device %d allocation 0x%" PRIxPTR " (%zu bytes)",
                    what, p, n, n - room, a->device, a->addr, a->size);
    if (a->epoch != g_ctx[a->device].epoch)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " was allocated before device %d's primary context was last released", what, p,
                    a->device);
    if (a->device != device) {
      struct fake_pool *pool = a->pool ? handle_get(KIND_POOL, (void *)a->pool, NULL) : NULL;
      int access = pool ? pool->access[device] : ((g_ctx[device].peer_mask >> a->device) & 1) ? 3 : 0;
      int need = write ? 3 : 1;
      if ((access & need) != need)
        return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                      "%s 0x%" PRIx64 " (%" PRIu64 " bytes) is memory of device %d, which a kernel on device %d "
                      "may not %s (%s)",
                      what, p, n, a->device, device, write ? "write" : "read",
                      pool ? "cuMemPoolSetAccess" : "cuCtxEnablePeerAccess");
    }
    return CUDA_SUCCESS;
  }
  struct fake_alloc *h = alloc_containing(&g_host_allocs, (uintptr_t)p);
  if (h) {
    uint64_t room = h->size - (p - h->addr);
    if (n > room)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " (%" PRIu64 " bytes) runs %" PRIu64
                    " bytes past the end of pinned block 0x%" PRIxPTR " (%zu bytes)",
                    what, p, n, n - room, h->addr, h->size);
    return CUDA_SUCCESS;
  }
  return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                "%s 0x%" PRIx64 " (%" PRIu64 " bytes) is neither device memory nor pinned host memory (a kernel "
                "cannot reach pageable or freed memory)",
                what, p, n);
}

/* Lock held. One copy of a kernel: both ranges reachable, no overlap. */
static CUresult check_kernel_copy(const char *fn, const char *what, uint64_t dst, uint64_t src, uint64_t n,
                                  int device) {
  char name[64];
  CUresult r;
  snprintf(name, sizeof name, "%s source", what);
  if ((r = check_kernel_range(fn, name, src, n, device, 0))) return r;
  snprintf(name, sizeof name, "%s destination", what);
  if ((r = check_kernel_range(fn, name, dst, n, device, 1))) return r;
  if (src < dst + n && dst < src + n)
    return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                  "%s: source 0x%" PRIx64 " and destination 0x%" PRIx64 " (%" PRIu64 " bytes) overlap", what, src, dst,
                  n);
  return CUDA_SUCCESS;
}

/* Reads kernel parameter i (size bytes) into out. */
static CUresult kernel_param(const char *fn, void **params, int i, void *out, size_t size) {
  if (!params[i]) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams[%d] is NULL", i);
  memcpy(out, params[i], size);
  return CUDA_SUCCESS;
}

/* Lock held. Each byte range the kernel touches, to the race check
 * (fake_races.c): checked, or (note) remembered. All are checked before any
 * is remembered, so a kernel never races itself. */
static CUresult kernel_races(const char *fn, int note, int kernel, uint64_t table, uint32_t n, uint64_t src,
                             uint64_t dst, uint64_t bytes, int device, uint64_t from, uint64_t until) {
  CUresult r = CUDA_SUCCESS;
#define VISIT(p, len, write, what)                                                         \
  do {                                                                                      \
    if (note) race_note((uintptr_t)(p), (size_t)(len), (write), device, from, until);      \
    else if (!r) r = race_check(fn, (what), (uintptr_t)(p), (size_t)(len), (write), from, until); \
  } while (0)
  switch (kernel) {
  case KERNEL_COPY_SEGMENTS:
  case KERNEL_SCATTER_SEGMENTS:
    VISIT(table, (uint64_t)n * sizeof(struct fake_segment), 0, "a segment table");
    for (uint32_t i = 0; i < n; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes == 0) continue;
      VISIT(kernel == KERNEL_SCATTER_SEGMENTS ? src + seg.src : seg.src, seg.bytes, 0, "a segment's source");
      VISIT(seg.dst, seg.bytes, 1, "a segment's destination");
    }
    break;
  case KERNEL_DEBUG_FILL:
    VISIT(dst, bytes, 1, "the fill's destination");
    break;
  case KERNEL_DEBUG_COPY:
    VISIT(src, bytes, 0, "the copy's source");
    VISIT(dst, bytes, 1, "the copy's destination");
    break;
  case KERNEL_PTX_ADD_ONE_F32:
    VISIT(dst, (uint64_t)n * 4u, 1, "add_one_f32 p");
    break;
  case KERNEL_PTX_SCALE_ADD_F32:
    VISIT(src, (uint64_t)n * 4u, 0, "scale_add_f32 x");
    VISIT(dst, (uint64_t)n * 4u, 1, "scale_add_f32 y");
    break;
  default:
    break;
  }
#undef VISIT
  return r;
}

FAKE_MODULE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "a zero dimension: grid %ux%ux%u, block %ux%ux%u", gridDimX,
                  gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);
  if (gridDimX > 0x7fffffffu || gridDimY > 65535 || gridDimZ > 65535)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "grid %ux%ux%u is too large", gridDimX, gridDimY, gridDimZ);
  if (blockDimX > 1024 || blockDimY > 1024 || blockDimZ > 64 ||
      (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "block %ux%ux%u is too large (at most 1024 threads)", blockDimX,
                  blockDimY, blockDimZ);
  if (sharedMemBytes > 48 * 1024)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "sharedMemBytes %u > 48 KiB", sharedMemBytes);
  if (extra) return report(CUDA_ERROR_INVALID_VALUE, fn, "extra is not NULL (the emulation takes kernelParams only)");
  if (!kernelParams) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams is NULL");

  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  struct fake_function *func;
  struct fake_module *m = NULL;
  int kernel = 0;
  uint64_t spin_ns = 0;
  /* What runs after the checks. */
  uint64_t table = 0, dst = 0, src = 0, bytes = 0;
  uint32_t n = 0, value = 0;
  float scale = 0, offset = 0;
  lock();
  if ((r = need_ctx(fn, &c))) goto out;
  if (!(func = handle_get(KIND_FUNCTION, f, NULL))) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "function %p is not a live function", (void *)f);
    goto out;
  }
  if (!(m = handle_get(KIND_MODULE, (void *)func->module, NULL))) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "the function's module was unloaded");
    goto out;
  }
  if (m->device != c->device || m->epoch != c->epoch) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn,
               "the function's module was loaded in device %d's context, current context is device %d%s", m->device,
               c->device, m->device == c->device ? " (since released)" : "");
    goto out;
  }
  if ((r = get_stream(fn, hStream, c, 1, &s))) goto out;
  kernel = func->kernel;
  switch (kernel) {
  case KERNEL_COPY_SEGMENTS:
    if ((r = kernel_param(fn, kernelParams, 0, &table, 8)) || (r = kernel_param(fn, kernelParams, 1, &n, 4))) break;
    if (n == 0) break;
    if ((r = check_kernel_range(fn, "segment table", table, (uint64_t)n * sizeof(struct fake_segment), c->device,
                                0)))
      break;
    for (uint32_t i = 0; i < n && !r; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes == 0) continue;
      char what[32];
      snprintf(what, sizeof what, "segment %u", i);
      r = check_kernel_copy(fn, what, seg.dst, seg.src, seg.bytes, c->device);
    }
    break;
  case KERNEL_SCATTER_SEGMENTS:
    if ((r = kernel_param(fn, kernelParams, 0, &src, 8)) || (r = kernel_param(fn, kernelParams, 1, &table, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &n, 4)))
      break;
    if (n == 0) break;
    if (table % 8) r = report(CUDA_ERROR_ILLEGAL_ADDRESS, fn, "table 0x%" PRIx64 " is not 8-byte aligned", table);
    if (!r) r = check_kernel_range(fn, "scatter table", table, (uint64_t)n * sizeof(struct fake_segment), c->device, 0);
    for (uint32_t i = 0; i < n && !r; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes == 0) continue;
      char what[32];
      snprintf(what, sizeof what, "segment %u", i);
      r = check_kernel_copy(fn, what, seg.dst, src + seg.src, seg.bytes, c->device);
    }
    break;
  case KERNEL_DEBUG_FILL: {
    uint32_t spin_us = 0;
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &bytes, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &value, 4)) || (r = kernel_param(fn, kernelParams, 3, &spin_us, 4)))
      break;
    spin_ns = (uint64_t)spin_us * 1000u;
    if (bytes) r = check_kernel_range(fn, "fill destination", dst, bytes, c->device, 1);
    break;
  }
  case KERNEL_DEBUG_COPY:
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &src, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &bytes, 8)))
      break;
    if (bytes) r = check_kernel_copy(fn, "copy", dst, src, bytes, c->device);
    break;
  case KERNEL_PTX_ADD_ONE_F32:
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &n, 4))) break;
    /* One thread per element: the grid covers so many. */
    if ((uint64_t)gridDimX * blockDimX < n) n = (uint32_t)((uint64_t)gridDimX * blockDimX);
    if (n) r = check_kernel_range(fn, "add_one_f32 p", dst, (uint64_t)n * 4u, c->device, 1);
    break;
  case KERNEL_PTX_SCALE_ADD_F32:
    if ((r = kernel_param(fn, kernelParams, 0, &src, 8)) || (r = kernel_param(fn, kernelParams, 1, &dst, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &scale, 4)) || (r = kernel_param(fn, kernelParams, 3, &offset, 4)) ||
        (r = kernel_param(fn, kernelParams, 4, &n, 4)))
      break;
    if ((uint64_t)gridDimX * blockDimX < n) n = (uint32_t)((uint64_t)gridDimX * blockDimX);
    if (n && !(r = check_kernel_range(fn, "scale_add_f32 x", src, (uint64_t)n * 4u, c->device, 0)))
      r = check_kernel_range(fn, "scale_add_f32 y", dst, (uint64_t)n * 4u, c->device, 1);
    break;
  case KERNEL_PTX_RECORD:
    break;
  default:
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "unknown kernel %d", kernel);
  }
  if (!r && kernel >= KERNEL_PTX_RECORD) {
    unsigned int dims[7] = {gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes};
    r = record_ptx_launch(fn, func, dims, (uintptr_t)hStream, kernelParams);
  }
  if (!r) {
    uint64_t from, until;
    stream_span(s, g_copy_delay_ns + spin_ns, &from, &until);
    r = kernel_races(fn, 0, kernel, table, n, src, dst, bytes, c->device, from, until);
    if (!r) kernel_races(fn, 1, kernel, table, n, src, dst, bytes, c->device, from, until);
  }
  if (!r) {
    s->busy_until = max_u64(s->busy_until, now_ns()) + g_copy_delay_ns + spin_ns;
    g_launch_count++;
  }
out:
  unlock();
  if (r) return r;
  /* The work itself, after the lock like the copies' memcpy. */
  switch (kernel) {
  case KERNEL_COPY_SEGMENTS:
    for (uint32_t i = 0; i < n; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes) memcpy((void *)(uintptr_t)seg.dst, (const void *)(uintptr_t)seg.src, seg.bytes);
    }
    break;
  case KERNEL_SCATTER_SEGMENTS:
    for (uint32_t i = 0; i < n; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes) memcpy((void *)(uintptr_t)seg.dst, (const void *)(uintptr_t)(src + seg.src), seg.bytes);
    }
    break;
  case KERNEL_DEBUG_FILL:
    if (bytes) memset((void *)(uintptr_t)dst, (int)(value & 0xffu), bytes);
    break;
  case KERNEL_DEBUG_COPY:
    if (bytes) memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    break;
  case KERNEL_PTX_ADD_ONE_F32:
    for (uint32_t i = 0; i < n; i++) {
      float v;
      memcpy(&v, (const char *)(uintptr_t)dst + 4u * i, 4);
      v += 1.0f;
      memcpy((char *)(uintptr_t)dst + 4u * i, &v, 4);
    }
    break;
  case KERNEL_PTX_SCALE_ADD_F32:
    for (uint32_t i = 0; i < n; i++) {
      float x, y;
      memcpy(&x, (const char *)(uintptr_t)src + 4u * i, 4);
      y = (float)((double)x * scale + offset); /* the product is exact in double, as in an fma */
      memcpy((char *)(uintptr_t)dst + 4u * i, &y, 4);
    }
    break;
  default:
    break;
  }
  return CUDA_SUCCESS;
}
