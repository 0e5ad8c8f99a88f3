/* device_alloc.c — mtc_device_block_alloc: device memory as a block of its
 * own, for tensors that a caller fills (with kernels) instead of copies. */
#include <stdint.h>

#include "base/error.h"
#include "memory/block.h"

static const char call[] = "mtc_device_block_alloc";

/* Allocates (and zeroes) on the device's copy stream, then waits for the
 * stream: pool memory is ordered on the stream it was allocated on, and the
 * caller may use it from any other. */
static mtc_status alloc_ready(const mtc_cuda_api *cu, mtc_device *d,
                              uint64_t bytes, uint32_t flags,
                              mtc_block **out) {
  mtc_block *block = NULL;
  mtc_status status = mtc_block_new_device(d, bytes, &block);
  if (status != MTC_OK) return status;
  CUresult r = CUDA_SUCCESS;
  const char *what = "cuMemsetD8Async";
  if (flags & MTC_ALLOC_ZERO) {
    r = cu->cuMemsetD8Async((CUdeviceptr)block->address, 0, (size_t)bytes,
                            d->stream);
  }
  if (r == CUDA_SUCCESS) {
    what = "cuStreamSynchronize";
    r = cu->cuStreamSynchronize(d->stream);
  }
  if (r != CUDA_SUCCESS) {
    status = mtc_cuda_fail(r, what);
    mtc_block_release(block);
    return status;
  }
  *out = block;
  return MTC_OK;
}

MTC_API mtc_status mtc_device_block_alloc(int32_t device, uint64_t bytes,
                                          uint32_t flags,
                                          mtc_block **out_block) {
  if (out_block == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: out_block must not be NULL", call);
  }
  *out_block = NULL;
  if (device < 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: device %d is not a CUDA device ordinal (0, 1, "
                         "...); host memory is not allocated here",
                         call, device);
  }
  if ((flags & ~(uint32_t)MTC_ALLOC_ZERO) != 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: unknown flags 0x%x (only MTC_ALLOC_ZERO)", call,
                         flags);
  }
  mtc_device *d;
  mtc_status status = mtc_device_get(device, &d);
  if (status != MTC_OK || bytes == 0) return status;
  const mtc_cuda_api *cu;
  status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  if ((flags & MTC_ALLOC_ZERO) && cu->cuMemsetD8Async == NULL) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "%s: the CUDA driver lacks cuMemsetD8Async", call);
  }
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, d);
  if (status == MTC_OK) status = alloc_ready(cu, d, bytes, flags, out_block);
  mtc_context_scope_end(&scope);
  if (status != MTC_OK) {
    /* Keep the driver's words, say what was asked. */
    char why[MTC_ERROR_CAPACITY];
    mtc_format(why, sizeof why, "%s", mtc_error_text());
    mtc_error_set(status, "%s: %llu bytes on cuda:%d: %s", call,
                  (unsigned long long)bytes, device, why);
  }
  return status;
}
