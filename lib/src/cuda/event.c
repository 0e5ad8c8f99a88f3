/* event.c — the mtc_event calls of mtc.h: record, query, synchronize,
 * handle, retain and release. */
#include "cuda/event.h"

#include <stdlib.h>

#include "base/error.h"

static atomic_uint_fast64_t events_live;

uint64_t mtc_event_live_count(void) { return atomic_load(&events_live); }

mtc_status mtc_event_wrap(mtc_device *device, CUevent event, mtc_event **out) {
  mtc_event *e = malloc(sizeof *e);
  if (e == NULL) {
    mtc_device_event_release(device, event);
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  atomic_init(&e->refs, 1);
  e->device = device;
  e->event = event;
  atomic_fetch_add(&events_live, 1);
  *out = e;
  return MTC_OK;
}

/* Streams are carried as uint64_t; 0 is "no stream". */
static mtc_status need_stream(const char *call, uint64_t stream) {
  if (stream != 0) return MTC_OK;
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "%s: stream is 0; pass a CUstream (the legacy default "
                       "stream is not accepted)",
                       call);
}

MTC_API mtc_status mtc_event_record(int32_t device, uint64_t stream,
                                    mtc_event **out_event) {
  if (out_event == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_event_record: out_event must not be NULL");
  }
  *out_event = NULL;
  mtc_status status = need_stream("mtc_event_record", stream);
  if (status != MTC_OK) return status;
  mtc_device *d;
  status = mtc_device_get(device, &d);
  if (status != MTC_OK) return status;
  const mtc_cuda_api *cu;
  status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;

  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  CUevent event = NULL;
  status = mtc_context_scope_use(&scope, d);
  if (status == MTC_OK) status = mtc_device_event_acquire(d, &event);
  if (status == MTC_OK) {
    CUresult r = cu->cuEventRecord(event, (CUstream)(uintptr_t)stream);
    if (r != CUDA_SUCCESS) {
      mtc_device_event_release(d, event);
      status = mtc_cuda_fail(r, "mtc_event_record: cuEventRecord");
    }
  }
  mtc_context_scope_end(&scope);
  if (status != MTC_OK) return status;
  return mtc_event_wrap(d, event, out_event);
}

MTC_API mtc_status mtc_event_query(const mtc_event *event) {
  if (event == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_event_query: event must not be NULL");
  }
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  CUresult r = cu->cuEventQuery(event->event);
  if (r == CUDA_SUCCESS) return MTC_OK;
  if (r == CUDA_ERROR_NOT_READY) return MTC_IN_PROGRESS;
  return mtc_cuda_fail(r, "mtc_event_query: cuEventQuery");
}

MTC_API mtc_status mtc_event_synchronize(const mtc_event *event) {
  if (event == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_event_synchronize: event must not be NULL");
  }
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  CUresult r = cu->cuEventSynchronize(event->event);
  if (r != CUDA_SUCCESS) {
    return mtc_cuda_fail(r, "mtc_event_synchronize: cuEventSynchronize");
  }
  return MTC_OK;
}

MTC_API uint64_t mtc_event_handle(const mtc_event *event) {
  return event ? (uint64_t)(uintptr_t)event->event : 0;
}

MTC_API void mtc_event_retain(mtc_event *event) {
  if (event == NULL) return;
  atomic_fetch_add_explicit(&event->refs, 1, memory_order_relaxed);
}

MTC_API void mtc_event_release(mtc_event *event) {
  if (event == NULL) return;
  if (atomic_fetch_sub_explicit(&event->refs, 1, memory_order_acq_rel) != 1) {
    return;
  }
  /* Back to the device's free list: re-recording it later is fine, since
   * waits already queued on it captured the record they saw. */
  mtc_device_event_release(event->device, event->event);
  free(event);
  atomic_fetch_sub(&events_live, 1);
}
