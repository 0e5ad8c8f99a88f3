/* device_calls.c — the mtc.h calls about CUDA devices as a whole: how many
 * there are, which one is current on the calling thread, their names,
 * memory and peer access, and the driver itself. */
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

/* The driver and the CUdevice of ordinal, or an error naming `call`. */
static mtc_status find_device(const char *call, int32_t ordinal,
                              const mtc_cuda_api **cu, CUdevice *out) {
  mtc_status status = mtc_cuda_load(cu);
  if (status != MTC_OK) return status;
  int count = 0;
  status = mtc_cuda_device_count_internal(&count);
  if (status != MTC_OK) return status;
  if (ordinal < 0 || ordinal >= count) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: device %d does not exist (there are %d)", call,
                         ordinal, count);
  }
  CUresult r = (*cu)->cuDeviceGet(out, ordinal);
  return r == CUDA_SUCCESS ? MTC_OK : mtc_cuda_fail(r, "cuDeviceGet");
}

MTC_API mtc_status mtc_cuda_device_describe(int32_t device, char *name,
                                            size_t name_size,
                                            uint64_t *out_total_bytes) {
  if ((name == NULL && name_size > 0) || out_total_bytes == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_cuda_device_describe: name (with name_size > 0) "
                         "and out_total_bytes must not be NULL");
  }
  if (name_size > 0) name[0] = '\0';
  *out_total_bytes = 0;
  const mtc_cuda_api *cu;
  CUdevice handle;
  mtc_status status = find_device("mtc_cuda_device_describe", device, &cu, &handle);
  if (status != MTC_OK) return status;
  if (cu->cuDeviceGetName == NULL || cu->cuDeviceTotalMem_v2 == NULL) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "mtc_cuda_device_describe: the CUDA driver lacks "
                         "cuDeviceGetName or cuDeviceTotalMem_v2");
  }
  if (name_size > 0) {
    int length = name_size > 4096 ? 4096 : (int)name_size;
    CUresult r = cu->cuDeviceGetName(name, length, handle);
    if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDeviceGetName");
    name[name_size - 1] = '\0';
  }
  size_t bytes = 0;
  CUresult r = cu->cuDeviceTotalMem_v2(&bytes, handle);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDeviceTotalMem_v2");
  *out_total_bytes = bytes;
  return MTC_OK;
}

MTC_API mtc_status mtc_cuda_can_access_peer(int32_t device, int32_t peer,
                                            int32_t *out_can) {
  if (out_can == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_cuda_can_access_peer: out_can must not be NULL");
  }
  *out_can = 0;
  const mtc_cuda_api *cu;
  CUdevice a, b;
  mtc_status status = find_device("mtc_cuda_can_access_peer", device, &cu, &a);
  if (status == MTC_OK) {
    status = find_device("mtc_cuda_can_access_peer", peer, &cu, &b);
  }
  if (status != MTC_OK || device == peer) return status;
  int can = 0;
  CUresult r = cu->cuDeviceCanAccessPeer(&can, a, b);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDeviceCanAccessPeer");
  *out_can = can != 0;
  return MTC_OK;
}

MTC_API mtc_status mtc_cuda_driver_version(int32_t *out_version) {
  if (out_version == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_cuda_driver_version: out_version must not be NULL");
  }
  *out_version = 0;
  const mtc_cuda_api *cu;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  int version = 0;
  CUresult r = cu->cuDriverGetVersion(&version);
  if (r != CUDA_SUCCESS) return mtc_cuda_fail(r, "cuDriverGetVersion");
  *out_version = version;
  return MTC_OK;
}

MTC_API const char *mtc_cuda_driver_file(void) { return mtc_cuda_driver_path(); }
