// copy_segments.cu: libmtc's gather and scatter kernels.
//
//   extern "C" __global__ void mtc_copy_segments(const mtc_segment *table, uint32_t n)
//   extern "C" __global__ void mtc_scatter_segments(const uint8_t *base, const mtc_segment *table, uint32_t n)
//
// (the second reads sources at offsets from one base; see below)
//
// Copies each of the n segments {src, dst, bytes} of `table` (24 bytes each;
// lib/src/cuda/kernels.h declares the same struct) from src to dst. Addresses are
// device memory or pinned host memory (unified addressing), so one launch
// gathers many device tensors into one pinned block, or scatters/batches
// device-to-device copies. Any alignment and size, 0 included.
//
// Launch: blockDim = (mtc::kThreads, 1, 1); any grid. Blocks stride over the
// segments along x (block b takes segments b, b + gridDim.x, ...), loading
// them in batches of kThreads entries (the table usually lies in pinned host
// memory: one round trip per batch, not per segment). Within a batch,
//  - segments of at most kWarpSegmentBytes are copied by one warp each, by
//    the blocks with blockIdx.y == 0;
//  - larger ones by the whole block; a segment of more than kPartBytes is
//    split into up to gridDim.y parts, part p copied by the blocks with
//    blockIdx.y == p, so that one large segment spreads over many SMs.
// lib/src/cuda/kernels.c sizes the grid from n, the total and the largest segment.
#include <stdint.h>

#include "copy_common.cuh"

struct mtc_segment {
  uint64_t src;
  uint64_t dst;
  uint64_t bytes;
};
static_assert(sizeof(mtc_segment) == 24, "mtc_segment is 24 bytes");

namespace mtc {
namespace segments {
constexpr uint64_t kWarpSegmentBytes = 4096;  // kernels.c: MTC_KERNEL_WARP_SEGMENT_BYTES
constexpr uint64_t kPartBytes = 64 * 1024;    // kernels.c: MTC_KERNEL_PART_BYTES
constexpr uint64_t kPartAlign = 256;          // part boundaries, relative to the segment

// The body of both kernels: copies every segment of `table`, reading each
// one's bytes from base + src (base is 0 when src is an address).
__device__ __forceinline__ void copy_table(const mtc_segment *__restrict__ table, uint32_t n, uint64_t base) {
  constexpr uint32_t kThreads = mtc::kThreads;
  __shared__ mtc_segment batch[kThreads];
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t warp = threadIdx.x >> 5;
  const uint32_t warps = kThreads / 32;
  const uint64_t stride = gridDim.x;

  for (uint64_t first = blockIdx.x; first < n; first += stride * kThreads) {
    // This batch: segments first, first + stride, ... (at most kThreads).
    const uint64_t left = (n - 1 - first) / stride + 1;
    const uint32_t count = left < kThreads ? (uint32_t)left : kThreads;
    __syncthreads();  // the previous batch is no longer read
    if (threadIdx.x < count) batch[threadIdx.x] = table[first + threadIdx.x * stride];
    __syncthreads();

    if (blockIdx.y == 0) {
      for (uint32_t i = warp; i < count; i += warps) {
        const mtc_segment seg = batch[i];
        if (seg.bytes <= kWarpSegmentBytes) {
          mtc::copy_range(reinterpret_cast<uint8_t *>(seg.dst), reinterpret_cast<const uint8_t *>(base + seg.src),
                          seg.bytes, lane, 32);
        }
      }
    }
    for (uint32_t i = 0; i < count; i++) {
      const mtc_segment seg = batch[i];
      if (seg.bytes <= kWarpSegmentBytes) continue;
      uint64_t parts = (seg.bytes + kPartBytes - 1) / kPartBytes;
      if (parts > gridDim.y) parts = gridDim.y;
      if (blockIdx.y >= parts) continue;
      // Parts of equal size, rounded up to kPartAlign; trailing ones may be empty.
      const uint64_t part = ((seg.bytes + parts - 1) / parts + kPartAlign - 1) / kPartAlign * kPartAlign;
      const uint64_t begin = blockIdx.y * part;
      if (begin >= seg.bytes) continue;
      const uint64_t end = begin + part < seg.bytes ? begin + part : seg.bytes;
      mtc::copy_range(reinterpret_cast<uint8_t *>(seg.dst) + begin,
                      reinterpret_cast<const uint8_t *>(base + seg.src) + begin, end - begin, threadIdx.x, kThreads);
    }
  }
}
}  // namespace segments
}  // namespace mtc

extern "C" __global__ void __launch_bounds__(mtc::kThreads)
    mtc_copy_segments(const mtc_segment *__restrict__ table, uint32_t n) {
  mtc::segments::copy_table(table, n, 0);
}

// The scatter kernel of copies into existing device memory: `base` is
// where one copy's packed leaves lie (a scratch block that a DMA filled, or
// pinned staging the GPU reads in place), and `table` holds n segments whose
// src is an offset from base and dst the leaf's destination. The table is
// device memory: staged with the leaves by the same DMA, or written once
// for a prepared copy and read by each of its copies.
extern "C" __global__ void __launch_bounds__(mtc::kThreads)
    mtc_scatter_segments(const uint8_t *__restrict__ base, const mtc_segment *__restrict__ table, uint32_t n) {
  mtc::segments::copy_table(table, n, (uint64_t)(uintptr_t)base);
}
