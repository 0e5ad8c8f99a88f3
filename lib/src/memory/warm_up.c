/* warm_up.c — mtc_warm_up: a device's first-use costs paid ahead of its
 * first copy (context, copy stream, memory pool, kernels, pinned staging
 * buffers, device pool memory). */
#include <stdlib.h>

#include "base/error.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "memory/pinned_pool.h"

#define DEFAULT_BUFFER_BYTES ((uint64_t)8 << 20)
/* Buffers one call takes at most (a bound on its bookkeeping, not a limit
 * users meet: 4,096 buffers of the smallest class are 256 MiB). */
#define MAX_BUFFERS 4096

/* At the limit, warm-up takes nothing back from copies: it stops. */
static int give_up(void *context) {
  (void)context;
  return 0;
}

/* Takes staging buffers until pinned_bytes of them are held, then gives
 * them all back to the pool, where they stay idle for the copies to come. */
static mtc_status reserve_pinned(mtc_device *device, uint64_t pinned_bytes,
                                 uint64_t buffer_bytes) {
  size_t max = mtc_pinned_staging_max_bytes();
  size_t size = mtc_pinned_class_bytes(buffer_bytes ? buffer_bytes : DEFAULT_BUFFER_BYTES);
  if (size > max) size = max;
  uint64_t wanted = (pinned_bytes + size - 1) / size;
  if (wanted > MAX_BUFFERS) wanted = MAX_BUFFERS;
  mtc_pinned_buffer *taken = calloc(wanted ? wanted : 1, sizeof *taken);
  if (taken == NULL) return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  mtc_status status = MTC_OK;
  size_t count = 0;
  while (count < wanted) {
    mtc_pinned_stats stats;
    mtc_pinned_get_stats(&stats);
    if (stats.staging_bytes + stats.bytes_cached + size > stats.limit &&
        stats.bytes_cached < size) {
      break; /* at the limit: what fits is reserved */
    }
    status = mtc_pinned_acquire_staging(device, size, give_up, NULL, &taken[count]);
    if (status != MTC_OK) break;
    count++;
  }
  for (size_t i = 0; i < count; i++) mtc_pinned_release(&taken[i]);
  free(taken);
  return status;
}

MTC_API mtc_status mtc_warm_up(int32_t ordinal, uint64_t pinned_bytes,
                               uint64_t pinned_buffer_bytes,
                               uint64_t device_bytes) {
  if (ordinal < 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_warm_up: device %d is not a CUDA ordinal", ordinal);
  }
  mtc_device *device;
  mtc_status status = mtc_device_get(ordinal, &device);
  if (status != MTC_OK) return status;
  /* Loads the kernels' module; without it copies still work. */
  (void)mtc_kernels_available(device);
  if (pinned_bytes > 0) {
    status = reserve_pinned(device, pinned_bytes, pinned_buffer_bytes);
    if (status != MTC_OK) return status;
  }
  if (device_bytes == 0) return MTC_OK;
  const mtc_cuda_api *cu;
  status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, device);
  CUdeviceptr ptr = 0;
  if (status == MTC_OK) status = mtc_device_alloc(device, (size_t)device_bytes, &ptr);
  if (status == MTC_OK) {
    mtc_device_free(device, ptr);
    CUresult r = cu->cuStreamSynchronize(device->stream);
    if (r != CUDA_SUCCESS) status = mtc_cuda_fail(r, "cuStreamSynchronize");
  }
  mtc_context_scope_end(&scope);
  return status;
}
