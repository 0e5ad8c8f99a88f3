/* mtc/devices.h — MTC_DEVICE_CPU, the CUDA devices there are and the current
 * one.
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

#endif /* MTC_PUBLIC_DEVICES_H */
