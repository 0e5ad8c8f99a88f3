/* debug_kernels.c — mtc_has_kernels, mtc_debug_fill and mtc_debug_copy: the
 * test kernels of mtc.h, on the kernels of cuda/debug_kernels.cu. */
#include <stdint.h>

#include "cuda/device.h"
#include "base/error.h"
#include "cuda/kernels.h"

/* Grids of at most this many blocks: small enough that every block runs at
 * once (so a fill's spin is one spin, not one per wave), large enough to
 * copy at full speed. */
#define DEBUG_MAX_BLOCKS 256u

MTC_API int32_t mtc_has_kernels(void) { return mtc_kernels_built_in(); }

static mtc_status no_kernels(const char *call) {
  return mtc_error_set(MTC_ERR_UNSUPPORTED,
                       "%s: libmtc was built without its CUDA kernels (nvcc "
                       "was not found at build time: run scripts/setup.sh, "
                       "or build with -Dnvcc=/path/to/nvcc)",
                       call);
}

/* Checks that [address, address + bytes) is a range (0 only when empty). */
static mtc_status check_range(const char *call, const char *what,
                              uint64_t address, uint64_t bytes) {
  if (bytes > 0 && address == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "%s: %s is 0 (%llu bytes)",
                         call, what, (unsigned long long)bytes);
  }
  if (bytes > UINT64_MAX - address) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: %s 0x%llx + %llu bytes wraps around", call, what,
                         (unsigned long long)address,
                         (unsigned long long)bytes);
  }
  return MTC_OK;
}

/* Blocks for a grid-stride pass over bytes, 16 bytes a thread, four passes
 * a thread before the grid grows. */
static unsigned blocks_for(uint64_t bytes) {
  uint64_t per_block = (uint64_t)MTC_KERNEL_THREADS * 16u * 4u;
  uint64_t blocks = bytes / per_block + (bytes % per_block != 0);
  if (blocks == 0) blocks = 1;
  if (blocks > DEBUG_MAX_BLOCKS) blocks = DEBUG_MAX_BLOCKS;
  return (unsigned)blocks;
}

/* Makes device's context current and launches kernel id with params. */
static mtc_status launch(const char *call, int32_t device, uint64_t stream,
                         mtc_kernel_id id, unsigned blocks, void **params) {
  mtc_device *d;
  mtc_status status = mtc_device_get(device, &d);
  if (status != MTC_OK) return status;
  const mtc_cuda_api *cu;
  status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, d);
  CUfunction function = NULL;
  if (status == MTC_OK) status = mtc_kernels_function(d, id, &function);
  if (status == MTC_OK) {
    CUresult r = cu->cuLaunchKernel(function, blocks, 1, 1, MTC_KERNEL_THREADS,
                                    1, 1, 0, (CUstream)(uintptr_t)stream,
                                    params, NULL);
    if (r != CUDA_SUCCESS) {
      char what[64];
      mtc_format(what, sizeof what, "%s: cuLaunchKernel", call);
      status = mtc_cuda_fail(r, what);
    }
  }
  mtc_context_scope_end(&scope);
  return status;
}

MTC_API mtc_status mtc_debug_fill(int32_t device, uint64_t stream,
                                  uint64_t address, uint64_t bytes,
                                  uint32_t value_byte,
                                  uint32_t spin_microseconds) {
  static const char call[] = "mtc_debug_fill";
  if (!mtc_kernels_built_in()) return no_kernels(call);
  if (stream == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: stream is 0; pass a CUstream", call);
  }
  if (value_byte > 255) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: value_byte %u is not a byte (0..255)", call,
                         value_byte);
  }
  mtc_status status = check_range(call, "address", address, bytes);
  if (status != MTC_OK) return status;
  /* The kernel's parameters (cuda/debug_kernels.cu). */
  uint64_t dst = address, count = bytes;
  uint32_t value = value_byte, spin = spin_microseconds;
  void *params[] = {&dst, &count, &value, &spin};
  return launch(call, device, stream, MTC_KERNEL_DEBUG_FILL, blocks_for(bytes),
                params);
}

MTC_API mtc_status mtc_debug_copy(int32_t device, uint64_t stream,
                                  uint64_t dst, uint64_t src, uint64_t bytes) {
  static const char call[] = "mtc_debug_copy";
  if (!mtc_kernels_built_in()) return no_kernels(call);
  if (stream == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: stream is 0; pass a CUstream", call);
  }
  mtc_status status = check_range(call, "dst", dst, bytes);
  if (status == MTC_OK) status = check_range(call, "src", src, bytes);
  if (status != MTC_OK) return status;
  if (bytes > 0 && src < dst + bytes && dst < src + bytes) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: src 0x%llx and dst 0x%llx overlap (%llu bytes)",
                         call, (unsigned long long)src,
                         (unsigned long long)dst, (unsigned long long)bytes);
  }
  uint64_t d_arg = dst, s_arg = src, n_arg = bytes;
  void *params[] = {&d_arg, &s_arg, &n_arg};
  return launch(call, device, stream, MTC_KERNEL_DEBUG_COPY, blocks_for(bytes),
                params);
}
