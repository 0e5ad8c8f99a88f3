/* api.c — the library-wide calls of mtc.h: version, status names, last
 * error, devices, stats and pool trimming. */
#include <string.h>

#include "block.h"
#include "cuda_driver.h"
#include "error.h"
#include "mtc.h"
#include "pinned_pool.h"
#include "plan.h"
#include "staging_pool.h"

#define MTC_STRINGIFY_(x) #x
#define MTC_STRINGIFY(x) MTC_STRINGIFY_(x)

/* The layouts that bindings hard-code. */
_Static_assert(sizeof(mtc_leaf) == 40, "mtc_leaf is 40 bytes");
_Static_assert(sizeof(mtc_leaf_result) == 32, "mtc_leaf_result is 32 bytes");
_Static_assert(sizeof(mtc_options) == 56, "mtc_options is 56 bytes");
_Static_assert(sizeof(mtc_stats) == 80, "mtc_stats is 80 bytes");
_Static_assert(sizeof(mtc_block_info) == 32, "mtc_block_info is 32 bytes");
_Static_assert(sizeof(mtc_plan_stats) == 96, "mtc_plan_stats is 96 bytes");

MTC_API uint32_t mtc_version_number(void) { return MTC_VERSION_NUMBER; }

MTC_API const char *mtc_version_string(void) {
  return MTC_STRINGIFY(MTC_VERSION_MAJOR) "." MTC_STRINGIFY(
      MTC_VERSION_MINOR) "." MTC_STRINGIFY(MTC_VERSION_PATCH);
}

MTC_API const char *mtc_status_name(int32_t status) {
  switch (status) {
    case MTC_OK: return "MTC_OK";
    case MTC_IN_PROGRESS: return "MTC_IN_PROGRESS";
    case MTC_ERR_INVALID_ARGUMENT: return "MTC_ERR_INVALID_ARGUMENT";
    case MTC_ERR_INVALID_STATE: return "MTC_ERR_INVALID_STATE";
    case MTC_ERR_NO_DRIVER: return "MTC_ERR_NO_DRIVER";
    case MTC_ERR_NO_DEVICE: return "MTC_ERR_NO_DEVICE";
    case MTC_ERR_OUT_OF_MEMORY: return "MTC_ERR_OUT_OF_MEMORY";
    case MTC_ERR_CUDA: return "MTC_ERR_CUDA";
    case MTC_ERR_UNSUPPORTED: return "MTC_ERR_UNSUPPORTED";
    case MTC_ERR_INTERNAL: return "MTC_ERR_INTERNAL";
    default: return "MTC_UNKNOWN_STATUS";
  }
}

MTC_API const char *mtc_last_error(void) { return mtc_error_text(); }

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

MTC_API mtc_status mtc_get_stats(mtc_stats *out) {
  if (out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "out must not be NULL");
  }
  if (out->struct_size < sizeof(mtc_stats)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "out->struct_size is %u, needs at least %zu",
                         out->struct_size, sizeof(mtc_stats));
  }
  mtc_block_counters blocks;
  mtc_block_get_counters(&blocks);
  mtc_pinned_stats pinned;
  mtc_pinned_get_stats(&pinned);
  out->staging_threads = mtc_staging_pool_size();
  out->plans_live = mtc_plan_live_count();
  out->blocks_live = blocks.blocks_live;
  out->device_bytes_live = blocks.device_bytes_live;
  out->host_bytes_live = blocks.host_bytes_live;
  out->pinned_bytes_cached = pinned.bytes_cached;
  out->pinned_bytes_in_use = pinned.bytes_in_use;
  out->pinned_allocations = pinned.allocations;
  out->pinned_reuses = pinned.reuses;
  out->reserved0 = 0;
  return MTC_OK;
}

MTC_API void mtc_trim_pools(void) { mtc_pinned_trim(); }
