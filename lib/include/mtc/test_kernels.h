/* mtc/test_kernels.h — mtc_has_kernels and the debug kernels for tests and
 * demonstrations.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_TEST_KERNELS_H
#define MTC_PUBLIC_TEST_KERNELS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/test_kernels.h"
#endif

/* ----------------------------------------------------------- test kernels */

/* Nonzero when this build carries its CUDA kernels (built with nvcc): the
 * gather kernel for device-to-host and batched device-to-device copies, and
 * the two kernels below. */
MTC_API int32_t mtc_has_kernels(void);

/* For tests and demonstrations of stream ordering: queues a kernel on
 * stream (of device) that spins for spin_microseconds, then sets `bytes`
 * bytes at device address `address` to value_byte. MTC_ERR_UNSUPPORTED
 * without kernels. */
MTC_API mtc_status mtc_debug_fill(int32_t device, uint64_t stream,
                                  uint64_t address, uint64_t bytes,
                                  uint32_t value_byte,
                                  uint32_t spin_microseconds);

/* For tests: queues a kernel on stream (of device) that copies `bytes` bytes
 * from device address src to dst (a kernel that reads copied data, unlike a
 * DMA). MTC_ERR_UNSUPPORTED without kernels. */
MTC_API mtc_status mtc_debug_copy(int32_t device, uint64_t stream,
                                  uint64_t dst, uint64_t src, uint64_t bytes);

#endif /* MTC_PUBLIC_TEST_KERNELS_H */
