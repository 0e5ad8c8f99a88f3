/* stream_api.c — the stream calls of mtc.h: create, destroy, synchronize
 * and wait on an event. Each makes the device's primary context current for
 * the driver call and, on a caller's thread, restores the caller's context
 * afterwards. */
#include <stdint.h>

#include "cuda/device.h"
#include "base/error.h"
#include "cuda/event.h"

/* Loads the driver, finds the device and makes its context current. */
static mtc_status enter(int32_t device, mtc_context_scope *scope,
                        const mtc_cuda_api **cu, mtc_device **out) {
  mtc_context_scope_begin(scope);
  mtc_status status = mtc_device_get(device, out);
  if (status != MTC_OK) return status;
  status = mtc_cuda_load(cu);
  if (status != MTC_OK) return status;
  return mtc_context_scope_use(scope, *out);
}

MTC_API mtc_status mtc_stream_create(int32_t device, uint64_t *out_stream) {
  if (out_stream == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_stream_create: out_stream must not be NULL");
  }
  *out_stream = 0;
  mtc_context_scope scope;
  const mtc_cuda_api *cu;
  mtc_device *d;
  mtc_status status = enter(device, &scope, &cu, &d);
  if (status == MTC_OK) {
    /* Non-blocking, like the library's own streams: work on it never
     * serialises with the legacy default stream. */
    CUstream stream = NULL;
    CUresult r = cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) {
      *out_stream = (uint64_t)(uintptr_t)stream;
    } else {
      status = mtc_cuda_fail(r, "mtc_stream_create: cuStreamCreate");
    }
  }
  mtc_context_scope_end(&scope);
  return status;
}

MTC_API void mtc_stream_destroy(int32_t device, uint64_t stream) {
  if (stream == 0) return;
  mtc_context_scope scope;
  const mtc_cuda_api *cu;
  mtc_device *d;
  if (enter(device, &scope, &cu, &d) == MTC_OK) {
    CUresult r = cu->cuStreamDestroy_v2((CUstream)(uintptr_t)stream);
    /* Nothing to return; the message is there for whoever looks. */
    if (r != CUDA_SUCCESS) mtc_cuda_fail(r, "mtc_stream_destroy: cuStreamDestroy");
  }
  mtc_context_scope_end(&scope);
}

MTC_API mtc_status mtc_stream_synchronize(int32_t device, uint64_t stream) {
  if (stream == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_stream_synchronize: stream is 0; pass a "
                         "CUstream");
  }
  mtc_context_scope scope;
  const mtc_cuda_api *cu;
  mtc_device *d;
  mtc_status status = enter(device, &scope, &cu, &d);
  if (status == MTC_OK) {
    CUresult r = cu->cuStreamSynchronize((CUstream)(uintptr_t)stream);
    if (r != CUDA_SUCCESS) {
      status = mtc_cuda_fail(r, "mtc_stream_synchronize: cuStreamSynchronize");
    }
  }
  mtc_context_scope_end(&scope);
  /* Launches the stream has passed give their blocks back (launch.c). */
  if (status == MTC_OK) mtc_launches_settle(0);
  return status;
}

MTC_API mtc_status mtc_stream_wait_event(int32_t device, uint64_t stream,
                                         const mtc_event *event) {
  if (stream == 0 || event == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_stream_wait_event: %s",
                         stream == 0 ? "stream is 0; pass a CUstream"
                                     : "event must not be NULL");
  }
  mtc_context_scope scope;
  const mtc_cuda_api *cu;
  mtc_device *d;
  mtc_status status = enter(device, &scope, &cu, &d);
  if (status == MTC_OK) {
    /* The event may belong to another device: the driver orders across
     * devices as long as the stream's own context is current. */
    CUresult r =
        cu->cuStreamWaitEvent((CUstream)(uintptr_t)stream, event->event, 0);
    if (r != CUDA_SUCCESS) {
      status = mtc_cuda_fail(r, "mtc_stream_wait_event: cuStreamWaitEvent");
    }
  }
  mtc_context_scope_end(&scope);
  return status;
}
