/* driver.h — loading the CUDA driver: libcuda.so.1 (or MTC_CUDA_DRIVER) is
 * opened with dlopen on first use and its entry points resolved into one
 * table; and turning the driver's results into libmtc's status and message. */
#ifndef MTC_CUDA_DRIVER_H
#define MTC_CUDA_DRIVER_H

#include "cuda/driver_api.h"

/* Loads and initialises the driver once per process (thread-safe). On
 * success *out points to the resolved table, valid for the process's life.
 * On failure returns MTC_ERR_NO_DRIVER and sets the thread's last error to a
 * message naming the library and the reason; later calls fail the same way. */
mtc_status mtc_cuda_load(const mtc_cuda_api **out);

/* Number of CUDA devices; loads the driver first. */
mtc_status mtc_cuda_device_count_internal(int *out_count);

/* The file the driver was loaded from ("libcuda.so.1" when found by the
 * loader's search), or NULL when it could not be loaded. */
const char *mtc_cuda_driver_path(void);

/* Sets the thread's last error to "<what> failed: CUDA_ERROR_X (...)" and
 * returns the matching status (MTC_ERR_OUT_OF_MEMORY for out-of-memory,
 * MTC_ERR_CUDA otherwise). */
mtc_status mtc_cuda_fail(CUresult result, const char *what);

/* "CUDA_ERROR_X" for result, never NULL. */
const char *mtc_cuda_error_name(CUresult result);

#endif
