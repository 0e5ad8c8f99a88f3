/* kernels.h — libmtc's own CUDA kernels (cuda/), compiled by nvcc into one
 * fatbin that build.zig embeds when nvcc is available (MTC_HAVE_KERNELS).
 * The module is loaded lazily, once per device, on that device's primary
 * context. Without the fatbin (or with a driver that cannot load it) the
 * kernels are "not available" and callers fall back to driver copies. */
#ifndef MTC_KERNELS_H
#define MTC_KERNELS_H

#include <stdint.h>

#include "cuda/device.h"

/* One copy of the segment-copy kernel's table. 24 bytes, as in
 * cuda/copy_segments.cu. */
typedef struct mtc_segment {
  uint64_t src;
  uint64_t dst;
  uint64_t bytes;
} mtc_segment;

_Static_assert(sizeof(mtc_segment) == 24, "mtc_segment is 24 bytes");

/* Nonzero when the segment-copy kernel is built in and loads on this device
 * (loads lazily, once per device, thread-safe). Leaves the thread's last
 * error as it was. */
int mtc_kernels_available(mtc_device *device);

/* Launches the segment-copy kernel on `stream` (device's context current):
 * copies each segment's bytes from src to dst (device or pinned-host
 * addresses the GPU can reach: unified addressing). `table` holds n segments
 * in pinned host memory that must stay valid until the kernel has finished.
 * Segments of 0 bytes are skipped; n == 0 launches nothing. Source and
 * destination of a segment must not overlap. MTC_ERR_UNSUPPORTED (message
 * saying why) when the kernels are not available on device. */
mtc_status mtc_kernels_copy_segments(mtc_device *device, CUstream stream,
                                     const mtc_segment *table, uint32_t n);

/* What sizes a segment launch's grid: how many segments take a warp, how
 * many a block, and the largest. */
typedef struct mtc_segments_size {
  uint64_t small, large, largest;
} mtc_segments_size;

/* Counts one segment of `bytes` into size. */
void mtc_segments_size_add(mtc_segments_size *size, uint64_t bytes);

/* Launches the scatter kernel on `stream` (device's context current): n
 * segments in device memory at `table`, each copying bytes from base + src
 * to dst. `base` is device memory or pinned host memory (unified
 * addressing) that holds one copy's packed leaves; the table may be staged
 * with them or written once and reused. `size` describes the n segments.
 * Errors as mtc_kernels_copy_segments. */
mtc_status mtc_kernels_scatter_segments(mtc_device *device, CUstream stream,
                                        uint64_t base, uint64_t table,
                                        const mtc_segments_size *size,
                                        uint32_t n);

/* ------------------------------------------------------ for debug_kernels.c */

/* Nonzero when this build embeds the kernels' fatbin. */
int mtc_kernels_built_in(void);

typedef enum mtc_kernel_id {
  MTC_KERNEL_COPY_SEGMENTS = 0,
  MTC_KERNEL_DEBUG_FILL = 1,
  MTC_KERNEL_DEBUG_COPY = 2,
  MTC_KERNEL_SCATTER_SEGMENTS = 3,
  MTC_KERNEL_COUNT = 4
} mtc_kernel_id;

/* Threads per block of every kernel (cuda/copy_common.cuh: mtc::kThreads). */
#define MTC_KERNEL_THREADS 256u

/* The kernel's function on device, loading the module on first use. On
 * failure returns the load's status and message (MTC_ERR_UNSUPPORTED when
 * the build or the driver has no kernels, or the GPU has no code in the
 * fatbin). */
mtc_status mtc_kernels_function(mtc_device *device, mtc_kernel_id id,
                                CUfunction *out);

#endif
