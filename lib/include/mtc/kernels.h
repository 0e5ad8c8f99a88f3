/* mtc/kernels.h — device blocks of their own, the caller's modules and
 * kernel launches.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_KERNELS_H
#define MTC_PUBLIC_KERNELS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/kernels.h"
#endif

/* ------------------------------------------------ device memory and kernels */

/* mtc_device_block_alloc flags. */
enum {
  MTC_ALLOC_ZERO = 1 /* the memory reads as zeros */
};

/* Allocates `bytes` bytes of memory on CUDA device `device` as a new block
 * with one reference, written to *out_block (release it with
 * mtc_block_release; mtc_block_get_info gives its address). The memory
 * comes from the device's pool, like a copy's output blocks. With
 * MTC_ALLOC_ZERO it reads as zeros, otherwise its contents are undefined.
 * Returns once the memory may be used from any stream of the device (the
 * allocation and the zeroing are ordered on the library's copy stream of
 * the device, which this waits for). 0 bytes checks the device and writes
 * NULL. Errors: MTC_ERR_INVALID_ARGUMENT for a negative device or unknown
 * flags, MTC_ERR_NO_DRIVER / MTC_ERR_NO_DEVICE as for a copy,
 * MTC_ERR_OUT_OF_MEMORY when the device has no room; *out_block is then
 * NULL. Any thread. */
MTC_API mtc_status mtc_device_block_alloc(int32_t device, uint64_t bytes,
                                          uint32_t flags,
                                          mtc_block **out_block);

/* A CUDA module loaded into a device's primary context: user kernels from
 * PTX text, a cubin or a fatbin, compiled by the driver (no CUDA toolkit at
 * run time). */
typedef struct mtc_module mtc_module;

/* Loads `bytes` bytes of a module image (PTX text, which need not end in a
 * NUL; or cubin / fatbin bytes) on `device` with cuModuleLoadData, and
 * writes the module to *out_module (NULL on error). The image is copied;
 * the caller keeps it. Errors name the driver's code and text:
 * MTC_ERR_CUDA for an image the driver rejects (CUDA_ERROR_INVALID_IMAGE,
 * CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NO_BINARY_FOR_GPU, ...), followed by
 * the JIT compiler's error log when it wrote one (cuModuleLoadDataEx),
 * MTC_ERR_UNSUPPORTED for a driver without module calls. Any thread. */
MTC_API mtc_status mtc_module_load(int32_t device, const void *image,
                                   uint64_t bytes, mtc_module **out_module);

/* Unloads the module: its functions may no longer be launched (launches
 * already queued still run). NULL is ignored. */
MTC_API void mtc_module_unload(mtc_module *module);

/* Writes the CUfunction of the kernel `name` (a NUL-terminated, unmangled
 * or mangled entry name) to *out_function: valid until the module is
 * unloaded. MTC_ERR_CUDA (CUDA_ERROR_NOT_FOUND) when the module has no
 * such kernel. */
MTC_API mtc_status mtc_module_get_function(mtc_module *module,
                                           const char *name,
                                           uint64_t *out_function);

/* Queues kernel `function` (of `module`) on `stream` (a CUstream of the
 * module's device, not 0) with cuLaunchKernel.
 *  - dims: 7 values: grid x, y, z, block x, y, z, dynamic shared memory
 *    bytes; every grid and block extent at least 1.
 *  - params: param_count parameters, parameter i at params +
 *    param_offsets[i] (offsets below params_bytes), each as many bytes as
 *    the kernel declares it (a device pointer is 8 bytes).
 *  - blocks: block_count blocks (NULL entries skipped) that the kernel
 *    reads or writes: each is retained until the stream has passed the
 *    launch (an event recorded after it), so that releasing them meanwhile
 *    frees nothing the kernel still uses. mtc_launches_settle, later
 *    launches and mtc_stream_synchronize release them.
 * Returns once the launch is queued; a failed launch (bad dimensions,
 * shared memory or parameters the driver rejects) is MTC_ERR_CUDA with the
 * driver's error name and text, and retains nothing. Should the event after
 * a queued launch fail, the call waits for the stream instead (so nothing
 * needs holding) and returns that error. MTC_ERR_INVALID_ARGUMENT for a
 * zero extent, stream 0 or an offset outside params. Any thread. */
MTC_API mtc_status mtc_kernel_launch(mtc_module *module, uint64_t function,
                                     uint64_t stream, const uint32_t *dims,
                                     const void *params, uint64_t params_bytes,
                                     const uint32_t *param_offsets,
                                     uint32_t param_count,
                                     mtc_block *const *blocks,
                                     uint32_t block_count);

/* Releases the blocks of launches that their streams have passed; with
 * wait nonzero, first waits for every launch still holding blocks. Returns
 * how many launches still hold blocks. Any thread. */
MTC_API uint32_t mtc_launches_settle(int32_t wait);

#endif /* MTC_PUBLIC_KERNELS_H */
