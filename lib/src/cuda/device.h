/* device.h — per-CUDA-device state, created on first use and kept for the
 * life of the process: the retained primary context, the copy stream every
 * libmtc copy for this device runs on, a stream-ordered memory pool, and a
 * free list of events. */
#ifndef MTC_DEVICE_H
#define MTC_DEVICE_H

#include <pthread.h>

#include "cuda/driver.h"

#define MTC_DEVICE_SPARE_EVENTS 64

typedef struct mtc_device {
  int ordinal;
  CUdevice handle;
  CUcontext context;
  /* Non-blocking, so that our copies never serialise with the legacy
   * default stream of the user's work. */
  CUstream stream;
  /* NULL when the driver has no stream-ordered allocator (or creating the
   * pool failed): then device blocks come from cuMemAlloc_v2. */
  CUmemoryPool pool;
  pthread_mutex_t event_lock;
  CUevent spare_events[MTC_DEVICE_SPARE_EVENTS];
  int spare_count;
  /* Access of this device to other devices' memory, by owner ordinal (one
   * entry per device of the machine): MTC_PEER_*. Guarded by peer_lock. */
  pthread_mutex_t peer_lock;
  signed char *peer;
} mtc_device;

enum {
  MTC_PEER_UNKNOWN = 0, /* not set up yet */
  MTC_PEER_ENABLED = 1, /* peer access on, owner's pool shared */
  MTC_PEER_NONE = -1    /* the pair cannot access each other */
};

/* The device state for a CUDA ordinal, created on first use (thread-safe).
 * Fails with MTC_ERR_NO_DRIVER / MTC_ERR_NO_DEVICE / a CUDA error, with the
 * thread's last error set. */
mtc_status mtc_device_get(int ordinal, mtc_device **out);

/* Marks the calling thread as owned by libmtc: context scopes on it set the
 * current context and leave it there instead of pushing and popping. */
void mtc_device_mark_library_thread(void);

/* Makes device contexts current for a stretch of work and, on a caller's
 * thread, restores the caller's current context afterwards. */
typedef struct mtc_context_scope {
  CUcontext current; /* the context this scope made current, or NULL */
  int pushed;        /* 1 when end() must pop */
} mtc_context_scope;

void mtc_context_scope_begin(mtc_context_scope *scope);
/* Makes device's context current on this thread. */
mtc_status mtc_context_scope_use(mtc_context_scope *scope, mtc_device *device);
void mtc_context_scope_end(mtc_context_scope *scope);

/* Device memory, stream-ordered on the device's copy stream. The device's
 * context must be current. */
mtc_status mtc_device_alloc(mtc_device *device, size_t bytes,
                            CUdeviceptr *out);
/* Frees in stream order; pushes the device's context itself. Any thread. */
void mtc_device_free(mtc_device *device, CUdeviceptr ptr);

/* An event (timing disabled) from the free list or newly created. The
 * device's context must be current. */
mtc_status mtc_device_event_acquire(mtc_device *device, CUevent *out);
/* Returns an event to the free list (destroys it when the list is full). */
void mtc_device_event_release(mtc_device *device, CUevent event);

/* Lets `accessor` read and write `owner`'s memory, once per ordered pair
 * (thread-safe; later calls return what the first found): cuDeviceCanAccessPeer,
 * then cuCtxEnablePeerAccess in accessor's context (an "already enabled"
 * answer counts as success: another library may have done it), then
 * cuMemPoolSetAccess on owner's pool for accessor, read-write. Writes 1 to
 * *out_usable when kernels and copies on accessor may touch owner's memory
 * from cuMemAlloc and from our pool, 0 when the pair cannot (then peer
 * copies still work, staged by the driver). Fails only on driver errors,
 * with the thread's last error set; the pair is then marked unusable. */
mtc_status mtc_device_enable_peer(mtc_device *accessor, mtc_device *owner,
                                  int *out_usable);

/* For tests: ordered pairs set up so far (calls that reached the driver). */
uint64_t mtc_device_peer_setup_count(void);

/* For tests: events idle in the free lists of all devices set up so far. */
int mtc_device_spare_event_total(void);

#endif
