/* driver_api.h — the slice of the CUDA driver API that libmtc uses: its
 * types, constants and the table of entry points, declared here so that the
 * library builds without cuda.h and has no link-time dependency on libcuda.
 * Declarations only; driver.h loads the table. */
#ifndef MTC_CUDA_DRIVER_API_H
#define MTC_CUDA_DRIVER_API_H

#include <stddef.h>
#include <stdint.h>

#include "mtc.h"

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
/* The types are cuda.h's own (unsigned long long, struct tags), so that
 * calls through this table match the driver's definitions exactly (as
 * -fsanitize=function checks against the emulated driver). */
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  CU_MEMHOSTALLOC_PORTABLE = 1,
  CU_MEM_ALLOCATION_TYPE_PINNED = 1,
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  /* CUmemAccess_flags */
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
};

/* JIT options of cuModuleLoadDataEx that libmtc passes (cuda.h's values). */
typedef enum CUjit_option_enum {
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
} CUjit_option;

typedef struct CUmemLocation_st {
  int type;
  int id;
} CUmemLocation;

/* Must match the driver's layout: 88 bytes. */
typedef struct CUmemPoolProps_st {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps is 88 bytes");

/* Which device may access a pool's memory, and how (cuMemPoolSetAccess). */
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags; /* CU_MEM_ACCESS_FLAGS_PROT_* */
} CUmemAccessDesc;

_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

/* Entry points, resolved once with dlsym under these exact names. */
typedef struct mtc_cuda_api {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext *ctx);
  CUresult (*cuCtxGetDevice)(CUdevice *device);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event,
                                unsigned int flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  /* Optional: only trace mode uses timing events (trace.h). */
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  /* Optional: what mtc_cuda_device_describe reports. */
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice device);
  CUresult (*cuMemHostAlloc)(void **ptr, size_t bytes, unsigned int flags);
  CUresult (*cuMemFreeHost)(void *ptr);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  /* The stream-ordered allocator entries below may be missing from old
   * drivers; then they stay NULL and devices fall back to cuMemAlloc_v2. */
  CUresult (*cuMemPoolCreate)(CUmemoryPool *pool, const CUmemPoolProps *props);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool pool);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool pool, int attribute,
                                    void *value);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *ptr, size_t bytes,
                                      CUmemoryPool pool, CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
  /* Non-NULL exactly when the allocator entries above are (same driver
   * release), so a device with a pool can always call it. */
  CUresult (*cuMemPoolSetAccess)(CUmemoryPool pool, const CUmemAccessDesc *map,
                                 size_t count);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void *src,
                                   size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void *dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream);
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr dst, CUcontext dst_ctx,
                                CUdeviceptr src, CUcontext src_ctx,
                                size_t bytes, CUstream stream);
  CUresult (*cuDeviceCanAccessPeer)(int *can_access, CUdevice device,
                                    CUdevice peer_device);
  /* Lets the current context access peer's memory (cuMemAlloc memory; pool
   * memory needs cuMemPoolSetAccess). CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
   * when it already can. */
  CUresult (*cuCtxEnablePeerAccess)(CUcontext peer, unsigned int flags);
  /* Modules and launches (libmtc's own kernels). All four or none: NULL when
   * the driver lacks any of them, and then kernels.c reports "no kernels". */
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module,
                                  const char *name);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x,
                             unsigned int grid_y, unsigned int grid_z,
                             unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes,
                             CUstream stream, void **params, void **extra);
  /* Zeroing of mtc_device_block_alloc(MTC_ALLOC_ZERO); NULL when missing. */
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value,
                              size_t count, CUstream stream);
  /* mtc_module_load with the JIT compiler's error log; NULL when missing
   * (or when the module calls above are), and then cuModuleLoadData. */
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image,
                                 unsigned int num_options, CUjit_option *options,
                                 void **option_values);
} mtc_cuda_api;

#endif
