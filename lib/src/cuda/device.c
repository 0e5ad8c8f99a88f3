/* device.c — lazily created per-device state and context handling. */
#include "cuda/device.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static mtc_device **devices; /* one slot per ordinal, NULL until used */
static int devices_count = -1;

static _Thread_local int is_library_thread;
/* On library threads: the context we last made current, so that nested
 * scopes (a pinned allocation inside a transfer) see what is current. */
static _Thread_local CUcontext library_thread_context;

void mtc_device_mark_library_thread(void) { is_library_thread = 1; }

/* Creates stream and pool for a device whose primary context is current. */
static mtc_status device_init_resources(const mtc_cuda_api *cu,
                                        mtc_device *d) {
  CUresult r = cu->cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuStreamCreate");

  d->pool = NULL;
  if (cu->cuMemPoolCreate != NULL) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = d->ordinal;
    CUmemoryPool pool = NULL;
    if (cu->cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS) {
      /* Keep freed memory cached in the pool instead of returning it to the
       * OS at every synchronisation: that is what makes allocation cheap. */
      cuuint64_t threshold = UINT64_MAX;
      cu->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                &threshold);
      d->pool = pool;
    }
  }
  return MTC_OK;
}

static void device_free_struct(mtc_device *d) {
  free(d->peer);
  free(d);
}

static mtc_status device_create(const mtc_cuda_api *cu, int ordinal,
                                int device_count, mtc_device **out) {
  mtc_device *d = calloc(1, sizeof *d);
  if (d != NULL) d->peer = calloc((size_t)device_count, sizeof *d->peer);
  if (d == NULL || d->peer == NULL) {
    free(d);
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  d->ordinal = ordinal;
  CUresult r = cu->cuDeviceGet(&d->handle, ordinal);
  if (r != CUDA_SUCCESS) {
    device_free_struct(d);
    return mtc_cuda_fail(r, "cuDeviceGet");
  }
  r = cu->cuDevicePrimaryCtxRetain(&d->context, d->handle);
  if (r != CUDA_SUCCESS) {
    device_free_struct(d);
    return mtc_cuda_fail(r, "cuDevicePrimaryCtxRetain");
  }
  r = cu->cuCtxPushCurrent_v2(d->context);
  if (r != CUDA_SUCCESS) {
    cu->cuDevicePrimaryCtxRelease_v2(d->handle);
    device_free_struct(d);
    return mtc_cuda_fail(r, "cuCtxPushCurrent");
  }
  mtc_status status = device_init_resources(cu, d);
  CUcontext popped;
  cu->cuCtxPopCurrent_v2(&popped);
  if (status != MTC_OK) {
    cu->cuDevicePrimaryCtxRelease_v2(d->handle);
    device_free_struct(d);
    return status;
  }
  pthread_mutex_init(&d->event_lock, NULL);
  pthread_mutex_init(&d->peer_lock, NULL);
  *out = d;
  return MTC_OK;
}

mtc_status mtc_device_get(int ordinal, mtc_device **out) {
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;

  pthread_mutex_lock(&devices_lock);
  if (devices_count < 0) {
    int count = 0;
    CUresult r = cu->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
      pthread_mutex_unlock(&devices_lock);
      return mtc_cuda_fail(r, "cuDeviceGetCount");
    }
    devices = count > 0 ? calloc((size_t)count, sizeof *devices) : NULL;
    if (count > 0 && devices == NULL) {
      pthread_mutex_unlock(&devices_lock);
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    devices_count = count;
  }
  if (ordinal < 0 || ordinal >= devices_count) {
    int count = devices_count;
    pthread_mutex_unlock(&devices_lock);
    return mtc_error_set(MTC_ERR_NO_DEVICE,
                         "cuda:%d requested but this machine has %d CUDA "
                         "device%s",
                         ordinal, count, count == 1 ? "" : "s");
  }
  status = MTC_OK;
  if (devices[ordinal] == NULL) {
    status = device_create(cu, ordinal, devices_count, &devices[ordinal]);
  }
  if (status == MTC_OK) *out = devices[ordinal];
  pthread_mutex_unlock(&devices_lock);
  return status;
}

void mtc_context_scope_begin(mtc_context_scope *scope) {
  scope->current = NULL;
  scope->pushed = 0;
}

mtc_status mtc_context_scope_use(mtc_context_scope *scope,
                                 mtc_device *device) {
  const mtc_cuda_api *cu;
  CUresult r;
  if (is_library_thread) {
    /* Our own thread has no caller context to preserve. */
    if (library_thread_context != device->context) {
      mtc_status status = mtc_cuda_load(&cu);
      if (status != MTC_OK) return status;
      r = cu->cuCtxSetCurrent(device->context);
      if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxSetCurrent");
      library_thread_context = device->context;
    }
    scope->current = device->context;
    return MTC_OK;
  }
  /* On a caller's thread nested scopes pop what they push, so what this
   * scope made current is still current. */
  if (scope->current == device->context) return MTC_OK;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  if (scope->pushed) {
    /* Replaces the top of the stack, which end() pops. */
    r = cu->cuCtxSetCurrent(device->context);
    if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxSetCurrent");
  } else {
    CUcontext caller = NULL;
    r = cu->cuCtxGetCurrent(&caller);
    if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxGetCurrent");
    if (caller != device->context) {
      r = cu->cuCtxPushCurrent_v2(device->context);
      if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxPushCurrent");
      scope->pushed = 1;
    }
  }
  scope->current = device->context;
  return MTC_OK;
}

void mtc_context_scope_end(mtc_context_scope *scope) {
  if (scope->pushed) {
    const mtc_cuda_api *cu;
    if (mtc_cuda_load(&cu) == MTC_OK) {
      CUcontext popped;
      cu->cuCtxPopCurrent_v2(&popped);
    }
  }
  scope->pushed = 0;
  scope->current = NULL;
}

mtc_status mtc_device_alloc(mtc_device *device, size_t bytes,
                            CUdeviceptr *out) {
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  CUresult r;
  if (device->pool != NULL) {
    r = cu->cuMemAllocFromPoolAsync(out, bytes, device->pool, device->stream);
    if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuMemAllocFromPoolAsync");
  } else {
    r = cu->cuMemAlloc_v2(out, bytes);
    if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuMemAlloc");
  }
  return MTC_OK;
}

void mtc_device_free(mtc_device *device, CUdeviceptr ptr) {
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK) return;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  if (mtc_context_scope_use(&scope, device) == MTC_OK) {
    if (device->pool != NULL) {
      cu->cuMemFreeAsync(ptr, device->stream);
    } else {
      cu->cuMemFree_v2(ptr);
    }
  }
  mtc_context_scope_end(&scope);
}

mtc_status mtc_device_event_acquire(mtc_device *device, CUevent *out) {
  pthread_mutex_lock(&device->event_lock);
  if (device->spare_count > 0) {
    *out = device->spare_events[--device->spare_count];
    pthread_mutex_unlock(&device->event_lock);
    return MTC_OK;
  }
  pthread_mutex_unlock(&device->event_lock);

  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  CUresult r = cu->cuEventCreate(out, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuEventCreate");
  return MTC_OK;
}

void mtc_device_event_release(mtc_device *device, CUevent event) {
  if (event == NULL) return;
  pthread_mutex_lock(&device->event_lock);
  if (device->spare_count < MTC_DEVICE_SPARE_EVENTS) {
    device->spare_events[device->spare_count++] = event;
    pthread_mutex_unlock(&device->event_lock);
    return;
  }
  pthread_mutex_unlock(&device->event_lock);
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK) return;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  if (mtc_context_scope_use(&scope, device) == MTC_OK) {
    cu->cuEventDestroy_v2(event);
  }
  mtc_context_scope_end(&scope);
}

static atomic_uint_fast64_t peer_setups;

uint64_t mtc_device_peer_setup_count(void) { return atomic_load(&peer_setups); }

/* The driver calls of mtc_device_enable_peer; *usable stays 0 when the pair
 * cannot access each other. */
static mtc_status peer_setup(const mtc_cuda_api *cu, mtc_device *accessor,
                             mtc_device *owner, int *usable) {
  int can = 0;
  CUresult r = cu->cuDeviceCanAccessPeer(&can, accessor->handle, owner->handle);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDeviceCanAccessPeer");
  if (!can) return MTC_OK;

  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  mtc_status status = mtc_context_scope_use(&scope, accessor);
  if (status == MTC_OK) {
    /* Maps owner's cuMemAlloc memory into accessor's context. */
    r = cu->cuCtxEnablePeerAccess(owner->context, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
      status = mtc_cuda_fail(r, "cuCtxEnablePeerAccess");
    }
  }
  if (status == MTC_OK && owner->pool != NULL &&
      cu->cuMemPoolSetAccess != NULL) {
    /* Pool memory ignores peer access: its pool grants access itself. */
    status = mtc_context_scope_use(&scope, owner);
    if (status == MTC_OK) {
      CUmemAccessDesc desc;
      memset(&desc, 0, sizeof desc);
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = accessor->ordinal;
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      r = cu->cuMemPoolSetAccess(owner->pool, &desc, 1);
      if (r != CUDA_SUCCESS) status = mtc_cuda_fail(r, "cuMemPoolSetAccess");
    }
  }
  mtc_context_scope_end(&scope);
  if (status == MTC_OK) *usable = 1;
  return status;
}

mtc_status mtc_device_enable_peer(mtc_device *accessor, mtc_device *owner,
                                  int *out_usable) {
  *out_usable = 0;
  if (accessor == owner) {
    *out_usable = 1;
    return MTC_OK;
  }
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  /* Held across the driver calls so that the pair is set up once, and
   * nobody uses it half set up. */
  pthread_mutex_lock(&accessor->peer_lock);
  signed char *state = &accessor->peer[owner->ordinal];
  if (*state == MTC_PEER_UNKNOWN) {
    atomic_fetch_add(&peer_setups, 1);
    int usable = 0;
    status = peer_setup(cu, accessor, owner, &usable);
    *state = usable ? MTC_PEER_ENABLED : MTC_PEER_NONE;
    if (status != MTC_OK) {
      char why[MTC_ERROR_CAPACITY];
      mtc_format(why, sizeof why, "%s", mtc_error_text());
      mtc_error_set(status,
                    "setting up access of cuda:%d to cuda:%d's memory: %s",
                    accessor->ordinal, owner->ordinal, why);
    }
  }
  *out_usable = *state == MTC_PEER_ENABLED;
  pthread_mutex_unlock(&accessor->peer_lock);
  return status;
}

int mtc_device_spare_event_total(void) {
  int total = 0;
  pthread_mutex_lock(&devices_lock);
  for (int i = 0; i < devices_count; i++) {
    mtc_device *d = devices[i];
    if (d == NULL) continue;
    pthread_mutex_lock(&d->event_lock);
    total += d->spare_count;
    pthread_mutex_unlock(&d->event_lock);
  }
  pthread_mutex_unlock(&devices_lock);
  return total;
}
