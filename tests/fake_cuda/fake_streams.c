/* fake_streams.c — the emulated driver's streams, events and copies: each
 * copy does its memcpy at once and moves its stream's busy_until, which
 * events capture and synchronizes wait for (the time model, fake_cuda.c). */
#include "fake_cuda.h"

/* ================================================================= streams */

FAKE_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!phStream) return report(CUDA_ERROR_INVALID_VALUE, __func__, "phStream is NULL");
  if (Flags > 1) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0 or 1)", Flags);
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) {
    struct fake_stream *s = calloc(1, sizeof *s);
    uintptr_t h = s ? handle_new(KIND_STREAM, s) : 0;
    if (!h) {
      free(s);
      r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another stream");
    } else {
      s->device = c->device;
      s->flags = Flags;
      *phStream = (CUstream)h;
    }
  }
  unlock();
  return r;
}

/* Pending copies need not finish: the handle dies at once, the work lives on. */
FAKE_API CUresult cuStreamDestroy_v2(CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_STREAM, hStream, &slot))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "stream %p is not a live stream (destroyed or never created)",
               (void *)hStream);
  else
    handle_drop(slot);
  unlock();
  return r;
}

FAKE_API CUresult cuStreamSynchronize(CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s;
  uint64_t until = 0;
  lock();
  if (is_null_stream(hStream)) {
    if (!(r = need_ctx(__func__, &c))) until = c->null_stream.busy_until;
  } else if (!(r = get_stream(__func__, hStream, NULL, 0, &s))) {
    until = s->busy_until;
  }
  unlock();
  if (r) return r;
  sleep_until(until);
  return CUDA_SUCCESS;
}

/* The event may come from any device: cross-device waits are legal. */
FAKE_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (Flags != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0)", Flags);
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  struct fake_event *e;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 0, &s)) &&
      !(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded)
    s->busy_until = max_u64(s->busy_until, e->ready_at);
  unlock();
  return r;
}

/* ================================================================== events */

FAKE_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!phEvent) return report(CUDA_ERROR_INVALID_VALUE, __func__, "phEvent is NULL");
  /* BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4 (needs DISABLE_TIMING). */
  if (Flags > 7 || ((Flags & 4) && !(Flags & 2)))
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags 0x%x", Flags);
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) {
    struct fake_event *e = calloc(1, sizeof *e);
    uintptr_t h = e ? handle_new(KIND_EVENT, e) : 0;
    if (!h) {
      free(e);
      r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another event");
    } else {
      e->device = c->device;
      e->flags = Flags;
      *phEvent = (CUevent)h;
    }
  }
  unlock();
  return r;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint32_t slot;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, &slot))) handle_drop(slot);
  unlock();
  return r;
}

FAKE_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_event *e;
  struct fake_stream *s;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_event(__func__, hEvent, c, &e, NULL)) &&
      !(r = get_stream(__func__, hStream, c, 1, &s))) {
    e->recorded = 1;
    /* The stream reaches the event once its earlier work is done, and not
     * before it was recorded (what cuEventElapsedTime measures from). */
    e->ready_at = max_u64(s->busy_until, now_ns());
  }
  unlock();
  return r;
}

/* Polled in loops: one lock, one table lookup, one clock read. */
FAKE_API CUresult cuEventQuery(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint64_t ready_at = 0;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded) ready_at = e->ready_at;
  unlock();
  if (r) return r;
  return ready_at > now_ns() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* The modelled time between two completed events, in ms. As the real
 * driver: INVALID_HANDLE when either was made with DISABLE_TIMING,
 * NOT_READY while either is pending or was never recorded. */
FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent hStart, CUevent hEnd) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!ms) return report(CUDA_ERROR_INVALID_VALUE, __func__, "ms is NULL");
  struct fake_event *a, *b;
  uint64_t start = 0, end = 0;
  int recorded = 0;
  lock();
  if (!(r = get_event(__func__, hStart, NULL, &a, NULL)) && !(r = get_event(__func__, hEnd, NULL, &b, NULL))) {
    if ((a->flags | b->flags) & 2) {
      r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "an event made with CU_EVENT_DISABLE_TIMING");
    } else {
      recorded = a->recorded && b->recorded;
      start = a->ready_at;
      end = b->ready_at;
    }
  }
  unlock();
  if (r) return r;
  if (!recorded || start > now_ns() || end > now_ns()) return CUDA_ERROR_NOT_READY;
  *ms = (float)(((double)end - (double)start) / 1e6);
  return CUDA_SUCCESS;
}

/* A test knob: how long a cuEventSynchronize stays in the driver after its
 * event completed, and how many threads are inside one now. */
static uint64_t g_sync_linger_ns;
static int g_syncs_in_progress;

FAKE_API CUresult cuEventSynchronize(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint64_t ready_at = 0, linger = 0;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded) ready_at = e->ready_at;
  if (!r) {
    linger = g_sync_linger_ns;
    g_syncs_in_progress++;
  }
  unlock();
  if (r) return r;
  sleep_until(ready_at);
  if (linger) sleep_until(now_ns() + linger);
  lock();
  g_syncs_in_progress--;
  unlock();
  return CUDA_SUCCESS;
}

/* Test-only: each cuEventSynchronize called from now on returns `us` µs
 * after its event completed (0: at once), so that a caller can act while
 * another thread is provably inside the driver's wait. */
FAKE_API void fake_cuda_set_sync_linger_us(unsigned long long us) {
  lock();
  g_sync_linger_ns = (uint64_t)us * 1000u;
  unlock();
}

/* Test-only: threads inside cuEventSynchronize now. */
FAKE_API int fake_cuda_synchronizes_in_progress(void) {
  lock();
  int n = g_syncs_in_progress;
  unlock();
  return n;
}

/* ================================================================= copies
 * Validation and the time model run under the lock; the memcpy runs after
 * it. n == 0 copies skip the range checks and succeed. */

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  int pinned = 1;
  uint64_t wait = 0;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, c->device)))
    r = check_host_range(__func__, "source", srcHost, ByteCount, &pinned);
  if (!r && ByteCount && pinned) r = race_copy(__func__, "source", s, srcHost, ByteCount, 0);
  if (!r) wait = stream_enqueue_copy(s, !pinned);
  unlock();
  if (r) return r;
  if (ByteCount) memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  if (wait) sleep_until(wait);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  int pinned = 1;
  uint64_t wait = 0;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "source", srcDevice, ByteCount, c->device)))
    r = check_host_range(__func__, "destination", dstHost, ByteCount, &pinned);
  if (!r && ByteCount && pinned) r = race_copy(__func__, "destination", s, dstHost, ByteCount, 1);
  if (!r) wait = stream_enqueue_copy(s, !pinned);
  unlock();
  if (r) return r;
  if (ByteCount) memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  if (wait) sleep_until(wait);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, c->device)))
    r = check_device_range(__func__, "source", srcDevice, ByteCount, c->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (ByteCount) memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                    CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c, *dc, *sc;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) &&
      !(r = check_ctx_handle(__func__, dstContext, &dc)) && !(r = check_ctx_handle(__func__, srcContext, &sc)) &&
      ByteCount && !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, dc->device)))
    r = check_device_range(__func__, "source", srcDevice, ByteCount, sc->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (ByteCount) memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

/* Fills at once, with the checks and time model of a copy. */
FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && N)
    r = check_device_range(__func__, "destination", dstDevice, N, c->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (N) memset((void *)(uintptr_t)dstDevice, uc, N);
  return CUDA_SUCCESS;
}
