// copy_common.cuh: device-side byte copies shared by libmtc's kernels.
//
// copy_range() copies n bytes from src to dst with `lanes` cooperating
// threads (a warp, a block or a whole grid; lane is the caller's index among
// them, lanes >= 16). It picks the widest access that the relative alignment
// of src and dst allows: 16-, 8- or 4-byte vectors after a few head bytes that
// align dst, with a byte tail; when src and dst differ in alignment mod 4,
// dst is still written in aligned 4-byte words, each assembled from two
// aligned source words with a funnel shift. Any alignment and any size,
// 0 included, is correct. src and dst must not overlap.
#pragma once

#include <stdint.h>

namespace mtc {

// blockDim.x of every libmtc kernel (lib/src/cuda/kernels.c: MTC_KERNEL_THREADS).
constexpr uint32_t kThreads = 256;

// Loads in flight per thread in the vector loops.
constexpr int kUnroll = 4;

// Sizes below this are copied byte by byte (not worth the set-up).
constexpr uint64_t kSmallCopyBytes = 64;

__device__ __forceinline__ void copy_bytes(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src,
                                           uint64_t n, uint32_t lane, uint32_t lanes) {
  for (uint64_t i = lane; i < n; i += lanes) dst[i] = src[i];
}

// V is the access type: uint4 (16 bytes), uint2 (8) or uint32_t (4). src and
// dst are congruent modulo sizeof(V).
template <typename V>
__device__ __forceinline__ void copy_vectors(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, uint64_t n,
                                             uint32_t lane, uint32_t lanes) {
  constexpr uint64_t W = sizeof(V);
  uint64_t head = (W - ((uintptr_t)dst & (W - 1))) & (W - 1);
  if (head > n) head = n;
  if (lane < head) dst[lane] = src[lane];
  dst += head;
  src += head;
  n -= head;
  const uint64_t count = n / W;
  V *__restrict__ d = reinterpret_cast<V *>(dst);
  const V *__restrict__ s = reinterpret_cast<const V *>(src);
  uint64_t i = lane;
  // kUnroll independent loads before the stores, so that each thread keeps
  // several memory requests in flight.
  for (; i + (kUnroll - 1) * (uint64_t)lanes < count; i += kUnroll * (uint64_t)lanes) {
    V v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; k++) v[k] = s[i + k * (uint64_t)lanes];
#pragma unroll
    for (int k = 0; k < kUnroll; k++) d[i + k * (uint64_t)lanes] = v[k];
  }
  for (; i < count; i += lanes) d[i] = s[i];
  const uint64_t done = count * W;
  const uint64_t tail = n - done;  // < W <= lanes
  if (lane < tail) dst[done + lane] = src[done + lane];
}

// src and dst differ in alignment mod 4: dst is written in aligned words,
// word i assembled from the two aligned source words that hold its bytes.
// Every source word read holds at least one byte of the range, so reads stay
// within the aligned words (and so the pages) the range touches; they may
// take up to 3 bytes before or after it (never written, never used).
__device__ __forceinline__ void copy_shifted(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, uint64_t n,
                                             uint32_t lane, uint32_t lanes) {
  uint64_t head = (4 - ((uintptr_t)dst & 3)) & 3;
  if (head > n) head = n;
  if (lane < head) dst[lane] = src[lane];
  dst += head;
  src += head;
  n -= head;
  const uint64_t count = n / 4;
  const uint32_t shift = 8u * (uint32_t)((uintptr_t)src & 3);  // 8, 16 or 24 here
  const uint32_t *__restrict__ s = reinterpret_cast<const uint32_t *>((uintptr_t)src & ~(uintptr_t)3);
  uint32_t *__restrict__ d = reinterpret_cast<uint32_t *>(dst);
  for (uint64_t i = lane; i < count; i += lanes) d[i] = __funnelshift_r(s[i], s[i + 1], shift);
  const uint64_t done = count * 4;
  const uint64_t tail = n - done;
  if (lane < tail) dst[done + lane] = src[done + lane];
}

__device__ __forceinline__ void copy_range(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src, uint64_t n,
                                           uint32_t lane, uint32_t lanes) {
  if (n < kSmallCopyBytes) {
    copy_bytes(dst, src, n, lane, lanes);
    return;
  }
  const uintptr_t mismatch = (uintptr_t)dst ^ (uintptr_t)src;
  if ((mismatch & 15) == 0) {
    copy_vectors<uint4>(dst, src, n, lane, lanes);
  } else if ((mismatch & 7) == 0) {
    copy_vectors<uint2>(dst, src, n, lane, lanes);
  } else if ((mismatch & 3) == 0) {
    copy_vectors<uint32_t>(dst, src, n, lane, lanes);
  } else {
    copy_shifted(dst, src, n, lane, lanes);
  }
}

}  // namespace mtc
