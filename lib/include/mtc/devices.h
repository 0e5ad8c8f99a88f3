/* mtc/devices.h — MTC_DEVICE_CPU, the CUDA devices there are and the current
 * one, what the driver says of each, and of itself.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_DEVICES_H
#define MTC_PUBLIC_DEVICES_H

#ifndef MTC_H
#error "include mtc.h, not mtc/devices.h"
#endif

/* ---------------------------------------------------------------- devices */

/* The device value that means host memory. CUDA devices are 0, 1, ... */
#define MTC_DEVICE_CPU (-1)

/* Writes the number of CUDA devices to *out_count. Without a driver it
 * writes 0 and returns MTC_ERR_NO_DRIVER (the message says why). */
MTC_API mtc_status mtc_cuda_device_count(int32_t *out_count);

/* Writes the calling thread's current CUDA device (that of its current
 * context) to *out_device, or 0 when the thread has no current context. */
MTC_API mtc_status mtc_cuda_current_device(int32_t *out_device);

/* What the driver says of device: its name (cut to name_size - 1 bytes,
 * NUL-terminated; name may be NULL when name_size is 0) and its memory in
 * bytes. MTC_ERR_INVALID_ARGUMENT for a device that does not exist,
 * MTC_ERR_UNSUPPORTED for a driver that lacks cuDeviceGetName or
 * cuDeviceTotalMem_v2, MTC_ERR_NO_DRIVER without one. */
MTC_API mtc_status mtc_cuda_device_describe(int32_t device, char *name,
                                            size_t name_size,
                                            uint64_t *out_total_bytes);

/* Writes 1 to *out_can when device may read and write peer's memory
 * directly (cuDeviceCanAccessPeer), else 0; 0 for device == peer. */
MTC_API mtc_status mtc_cuda_can_access_peer(int32_t device, int32_t peer,
                                            int32_t *out_can);

/* Writes the driver's CUDA version (cuDriverGetVersion: 1000 * major +
 * 10 * minor, e.g. 13000 for 13.0) to *out_version. */
MTC_API mtc_status mtc_cuda_driver_version(int32_t *out_version);

/* The file the CUDA driver was loaded from (as the dynamic loader resolved
 * it), valid for the process's life; NULL when no driver could be loaded
 * (mtc_cuda_device_count says why). */
MTC_API const char *mtc_cuda_driver_file(void);

#endif /* MTC_PUBLIC_DEVICES_H */
