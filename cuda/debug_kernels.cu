// debug_kernels.cu: kernels behind mtc_debug_fill and mtc_debug_copy (tests
// and demonstrations of stream ordering).
//
//   extern "C" __global__ void mtc_debug_fill(uint8_t *dst, uint64_t bytes, uint32_t value, uint32_t spin_us)
//       Waits spin_us microseconds (by the GPU's global timer), then sets
//       bytes bytes at dst to (uint8_t)value.
//   extern "C" __global__ void mtc_debug_copy(uint8_t *dst, const uint8_t *src, uint64_t bytes)
//       Copies bytes bytes from src to dst (not overlapping).
//
// Launch: blockDim = (mtc::kThreads, 1, 1), any 1-D grid; the threads of the grid
// stride over the bytes. Each block spins from its own start, so the fill
// begins at least spin_us after the kernel started (all blocks run at once
// for the small grids lib/src/cuda/debug_kernels.c launches).
#include <stdint.h>

#include "copy_common.cuh"

namespace mtc {
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
}  // namespace mtc

extern "C" __global__ void __launch_bounds__(mtc::kThreads)
    mtc_debug_fill(uint8_t *__restrict__ dst, uint64_t bytes, uint32_t value, uint32_t spin_us) {
  if (spin_us != 0) {
    if (threadIdx.x == 0) {
      const uint64_t start = mtc::global_timer_ns();
      const uint64_t wait = (uint64_t)spin_us * 1000u;
      while (mtc::global_timer_ns() - start < wait) {
        __nanosleep(1000);
      }
    }
    __syncthreads();
  }
  const uint32_t lane = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t lanes = gridDim.x * blockDim.x;
  const uint8_t b = (uint8_t)value;
  uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > bytes) head = bytes;
  if (lane < head) dst[lane] = b;
  dst += head;
  bytes -= head;
  const uint32_t w = b * 0x01010101u;
  const uint4 v = make_uint4(w, w, w, w);
  const uint64_t count = bytes / 16;
  uint4 *__restrict__ d = reinterpret_cast<uint4 *>(dst);
  for (uint64_t i = lane; i < count; i += lanes) d[i] = v;
  const uint64_t done = count * 16;
  if (lane < bytes - done) dst[done + lane] = b;
}

extern "C" __global__ void __launch_bounds__(mtc::kThreads)
    mtc_debug_copy(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, uint64_t bytes) {
  mtc::copy_range(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
