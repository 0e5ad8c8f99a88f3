/* device_calls.c — the mtc.h calls about CUDA devices as a whole: how many
 * there are, and which one is current on the calling thread. */
#include "base/error.h"
#include "cuda/driver.h"

MTC_API mtc_status mtc_cuda_device_count(int32_t *out_count) {
  if (out_count == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "out_count must not be NULL");
  }
  int count = 0;
  mtc_status status = mtc_cuda_device_count_internal(&count);
  *out_count = count;
  return status;
}

MTC_API mtc_status mtc_cuda_current_device(int32_t *out_device) {
  if (out_device == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "out_device must not be NULL");
  }
  *out_device = 0;
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  CUcontext context = NULL;
  CUresult r = cu->cuCtxGetCurrent(&context);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxGetCurrent");
  if (context == NULL) return MTC_OK;
  CUdevice device;
  r = cu->cuCtxGetDevice(&device);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuCtxGetDevice");
  /* CUdevice is a handle; the ordinal is the index that yields it. */
  int count = 0;
  r = cu->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDeviceGetCount");
  for (int ordinal = 0; ordinal < count; ordinal++) {
    CUdevice candidate;
    if (cu->cuDeviceGet(&candidate, ordinal) == CUDA_SUCCESS &&
        candidate == device) {
      *out_device = ordinal;
      return MTC_OK;
    }
  }
  *out_device = device;
  return MTC_OK;
}
