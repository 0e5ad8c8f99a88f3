/* fake_cuda.h — what the files of the emulated CUDA driver share, and no
 * one else sees: the CUDA types and calls as cuda.h declares them (no CUDA
 * headers exist on CI machines), the emulation's state, and the helpers
 * every driver area uses. The files, one driver area each:
 *
 *   fake_cuda.c      the global state, reporting, time, error names,
 *                    cuInit, and the test-only exports (fake_cuda_*)
 *   fake_registry.c  the handle and allocation registries, and the checks
 *                    every call shares (initialized, current context,
 *                    streams, events, copy ranges)
 *   fake_context.c   devices, primary contexts, peer access
 *   fake_streams.c   streams, events, copies and cuMemsetD8Async
 *   fake_memory.c    pinned memory, device memory, memory pools
 *   fake_modules.c   modules and their functions (fatbins, PTX)
 *   fake_launch.c    cuLaunchKernel: the kernels it runs on the host
 *   fake_races.c     the race check on pinned memory (a test knob)
 *
 * Everything declared here past the driver's own calls is hidden: the
 * library exports the driver's calls and the test-only ones only. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ================================================================ CUDA types
 * Declared here: no CUDA headers exist on CI machines. */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

/* Struct tags as cuda.h names them: function types then match libmtc's
 * declarations exactly (-fsanitize=function compares them). */
typedef struct CUmemLocation_st {
  int type; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
  int id;   /* device ordinal */
} CUmemLocation;

typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags; /* CU_MEM_ACCESS_FLAGS_PROT_NONE 0, _READ 1, _READWRITE 3 */
} CUmemAccessDesc;

_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

typedef struct CUmemPoolProps_st {
  int allocType;   /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
  int handleTypes; /* CUmemAllocationHandleType bits */
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize;       /* 0: no limit */
  unsigned short usage; /* 0 or CU_MEM_POOL_CREATE_USAGE_HW_DECOMPRESS */
  unsigned char reserved[54];
} CUmemPoolProps;

_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps is 88 bytes");
_Static_assert(sizeof(void *) == 8, "handles are encoded in 64-bit pointers");

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
};

/* The exported API, declared once as cuda.h would; FAKE_API keeps the
 * symbols exported even when the build passes -fvisibility=hidden. */
#define FAKE_API __attribute__((visibility("default")))
/* -DFAKE_CUDA_NO_MODULE_API builds a driver without the module and launch
 * calls (an old driver, for libmtc's "no kernels" path). */
#ifdef FAKE_CUDA_NO_MODULE_API
#define FAKE_MODULE_API __attribute__((visibility("hidden")))
#else
#define FAKE_MODULE_API FAKE_API
#endif
FAKE_API CUresult cuInit(unsigned int Flags);
FAKE_API CUresult cuDriverGetVersion(int *driverVersion);
FAKE_API CUresult cuGetErrorName(CUresult error, const char **pStr);
FAKE_API CUresult cuGetErrorString(CUresult error, const char **pStr);
FAKE_API CUresult cuDeviceGetCount(int *count);
FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal);
FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx);
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx);
FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx);
FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
FAKE_API CUresult cuCtxGetDevice(CUdevice *device);
FAKE_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
FAKE_API CUresult cuStreamDestroy_v2(CUstream hStream);
FAKE_API CUresult cuStreamSynchronize(CUstream hStream);
FAKE_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
FAKE_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
FAKE_API CUresult cuEventDestroy_v2(CUevent hEvent);
FAKE_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
FAKE_API CUresult cuEventQuery(CUevent hEvent);
FAKE_API CUresult cuEventSynchronize(CUevent hEvent);
FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent hStart, CUevent hEnd);
FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
FAKE_API CUresult cuMemFreeHost(void *p);
FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr);
FAKE_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool);
FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                          CUstream hStream);
FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                       CUstream hStream);
FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream);
FAKE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream);
FAKE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                    CUcontext srcContext, size_t ByteCount, CUstream hStream);
FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
FAKE_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
FAKE_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count);
FAKE_MODULE_API CUresult cuModuleLoadData(CUmodule *module, const void *image);
/* CUjit_option, as cuda.h names it (the two options the emulation reads). */
typedef enum CUjit_option_enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 } CUjit_option;
FAKE_MODULE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                            CUjit_option *options, void **optionValues);
FAKE_MODULE_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
FAKE_MODULE_API CUresult cuModuleUnload(CUmodule hmod);
FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
FAKE_MODULE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);

/* Test-only exports. */
FAKE_API int fake_cuda_live_device_allocations(void);
FAKE_API int fake_cuda_live_host_allocations(void);
FAKE_API int fake_cuda_live_streams(void);
FAKE_API int fake_cuda_live_events(void);
FAKE_API unsigned long long fake_cuda_copy_count(void);
FAKE_API unsigned long long fake_cuda_pageable_copy_count(void);
FAKE_API void fake_cuda_reset_counters(void);
FAKE_API void fake_cuda_set_copy_delay_us(unsigned long long us);
FAKE_API unsigned long long fake_cuda_kernel_launches(void);
FAKE_API int fake_cuda_live_modules(void);
FAKE_API void fake_cuda_fail_module_loads(int result);
FAKE_API int fake_cuda_last_launch(unsigned int *dims, unsigned char *params, unsigned int capacity);
FAKE_API unsigned long long fake_cuda_last_launch_stream(void);
FAKE_API void fake_cuda_check_races(int on);
FAKE_API unsigned long long fake_cuda_race_count(void);
FAKE_API void fake_cuda_set_sync_linger_us(unsigned long long us);
FAKE_API int fake_cuda_synchronizes_in_progress(void);

/* The legacy and per-thread default streams, as cuda.h defines them. */
#define FAKE_STREAM_LEGACY ((uintptr_t)0x1)
#define FAKE_STREAM_PER_THREAD ((uintptr_t)0x2)

#pragma GCC visibility push(hidden)

/* ============================================================ global state */

#define FAKE_MAX_DEVICES 64
#define FAKE_MAX_CTX_DEPTH 128

struct fake_stream {
  int device;
  unsigned flags;
  uint64_t busy_until; /* ns; the modelled end of the last queued copy */
};

struct fake_event {
  int device;
  unsigned flags;
  int recorded;
  uint64_t ready_at; /* ns; the recorded stream's busy_until */
};

struct fake_pool {
  int device;
  uint64_t max_size; /* 0: no limit */
  uint64_t used;
  /* CU_MEM_ACCESS_FLAGS_PROT_* per device (cuMemPoolSetAccess); the owner
   * has READWRITE. Checked when kernels touch pool memory of a peer. */
  unsigned char access[64];
};

struct fake_module {
  int device;
  uint32_t epoch; /* the context's epoch when loaded */
  int ptx;        /* the image was PTX text, kept in text */
  char text[];
};

/* Most parameters of a PTX kernel the emulation reads. */
#define FAKE_MAX_PARAMS 64

struct fake_function {
  uintptr_t module; /* handle of the module it came from */
  int kernel;       /* KERNEL_* */
  /* PTX kernels: the entry's name and its parameters' sizes in bytes. */
  char name[64];
  int param_count;
  uint32_t param_sizes[FAKE_MAX_PARAMS];
};

/* One primary context per device. A CUcontext is a pointer into g_ctx, so a
 * context handle is validated by its address alone. */
struct fake_ctx {
  int device;
  int refcount;       /* retains minus releases; 0: inactive */
  uint32_t epoch;     /* bumped each time the context becomes active */
  uint64_t used_bytes; /* device memory in use */
  uint64_t peer_mask;  /* bit d: cuCtxEnablePeerAccess gave access to device d */
  struct fake_stream null_stream; /* the NULL (legacy) stream */
};

/* One live allocation. device is -1 for pinned host memory. */
struct fake_alloc {
  uintptr_t addr;
  size_t size;
  int device;
  uint32_t epoch; /* the device context's epoch when allocated */
  uintptr_t pool; /* pool handle, or 0 */
};

/* Sorted by address, so the allocation holding an address is a binary search. */
struct alloc_list {
  struct fake_alloc *v;
  size_t n, cap;
};

enum { INIT_NONE = 0, INIT_OK = 1, INIT_NO_DEVICE = 2 };

extern atomic_int g_init_state;     /* INIT_*; read without the lock */
extern int g_device_count;
extern uint64_t g_device_mem_limit; /* per device */
extern uint64_t g_pinned_limit;     /* 0: no limit */
extern uint64_t g_pinned_used;
extern uint64_t g_copy_delay_ns;
/* fake_cuda_set_copy_delay_us was called: cuInit keeps its value. */
extern int g_copy_delay_set;
extern int g_no_peer; /* FAKE_CUDA_NO_PEER: no pair of devices has peer access */
extern unsigned long long g_copy_count;
extern unsigned long long g_pageable_copy_count;
extern unsigned long long g_launch_count;
extern CUresult g_module_load_error; /* fake_cuda_fail_module_loads */
extern struct fake_ctx g_ctx[FAKE_MAX_DEVICES];
extern struct alloc_list g_dev_allocs, g_host_allocs;

/* Per-thread context stack; the top is the current context. */
extern _Thread_local struct fake_ctx *t_ctx_stack[FAKE_MAX_CTX_DEPTH];
extern _Thread_local int t_ctx_depth;

/* The one lock around all of the state (not held during memcpy work). */
void lock(void);
void unlock(void);

/* Prints "fake_cuda: <fn>: <why>" on stderr, or appends it to FAKE_CUDA_LOG,
 * and returns r (fake_cuda.c). */
__attribute__((format(printf, 3, 4))) CUresult report(CUresult r, const char *fn, const char *fmt, ...);

/* CLOCK_MONOTONIC in ns, and a sleep until such a time. */
uint64_t now_ns(void);
void sleep_until(uint64_t t);

static inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ========================================================= handle registry
 * Streams, events and pools live in one slot table. A handle encodes kind,
 * slot generation and slot index, and stays below 2^47 like a real pointer
 * (JavaScript FFI layers keep pointers in doubles). A destroyed handle fails
 * the generation check; a made-up one fails the kind or index check. */

enum { KIND_STREAM = 1, KIND_EVENT = 2, KIND_POOL = 3, KIND_MODULE = 4, KIND_FUNCTION = 5, KIND_COUNT = 6 };

#define H_IDX_BITS 20
#define H_GEN_BITS 24
#define H_KIND_SHIFT (H_IDX_BITS + H_GEN_BITS)
#define H_IDX_MASK ((UINT64_C(1) << H_IDX_BITS) - 1)
#define H_GEN_MASK ((UINT64_C(1) << H_GEN_BITS) - 1)
#define H_MAX_SLOTS ((uint32_t)H_IDX_MASK) /* index + 1 must fit */
#define NO_SLOT UINT32_MAX

struct slot {
  void *obj;
  uint32_t gen;
  uint32_t next_free;
  int kind; /* 0: free */
};

extern struct slot *g_slots;
extern uint32_t g_slot_count;
extern int g_live[KIND_COUNT];

/* fake_registry.c. Lock held for all of these. */
/* Registers obj; returns its handle, or 0 when the table is full. */
uintptr_t handle_new(int kind, void *obj);
/* The object behind handle h of the given kind, or NULL. Writes its slot. */
void *handle_get(int kind, const void *h, uint32_t *out_slot);
/* Frees the object in slot i and makes its handle stale. */
void handle_drop(uint32_t i);
/* The allocation that holds byte p, or NULL. */
struct fake_alloc *alloc_containing(struct alloc_list *l, uintptr_t p);
/* An allocation that overlaps [p, p + n), n > 0, or NULL. */
struct fake_alloc *alloc_overlapping(struct alloc_list *l, uintptr_t p, size_t n);
int alloc_insert(struct alloc_list *l, const struct fake_alloc *a);
void alloc_remove(struct alloc_list *l, struct fake_alloc *a);
/* Poisons, then frees, so that use after free reads 0xDB bytes. */
void poison_free(uintptr_t addr, size_t size);

/* CUDA_ERROR_NOT_INITIALIZED before cuInit(0) succeeded (no lock needed). */
CUresult need_init(const char *fn);
/* The context behind a CUcontext handle, or NULL. */
struct fake_ctx *ctx_from_handle(CUcontext h);
struct fake_ctx *current_ctx(void);
/* The calling thread's current, active context. */
CUresult need_ctx(const char *fn, struct fake_ctx **out);
/* ctx must be a primary context that is retained. */
CUresult check_ctx_handle(const char *fn, CUcontext ctx, struct fake_ctx **out);
int is_null_stream(CUstream h);
/* Resolves h (NULL: cur's default stream). With same_ctx the stream must
 * belong to cur's device. */
CUresult get_stream(const char *fn, CUstream h, struct fake_ctx *cur, int same_ctx, struct fake_stream **out);
/* Same as get_stream for events (never NULL). */
CUresult get_event(const char *fn, CUevent h, struct fake_ctx *cur, struct fake_event **out, uint32_t *out_slot);
/* [p, p + n), n > 0, must lie inside one live allocation of device. */
CUresult check_device_range(const char *fn, const char *what, CUdeviceptr p, size_t n, int device);
/* The host side of a copy, n > 0: not NULL and not device memory. *pinned
 * says whether it lies inside one cuMemHostAlloc block. */
CUresult check_host_range(const char *fn, const char *what, const void *h, size_t n, int *pinned);
/* Queues one copy on s. Returns the time the caller must sleep until (a
 * copy with pageable host memory blocks), or 0. */
uint64_t stream_enqueue_copy(struct fake_stream *s, int blocking);

/* fake_races.c. Lock held. The modelled span of the next work on s that
 * takes cost ns (at least 1 ns). race_check fails a use of pinned bytes
 * that races an earlier one (see fake_races.c), race_note remembers one,
 * race_copy does both for a copy, race_forget drops freed memory's uses. */
void stream_span(const struct fake_stream *s, uint64_t cost, uint64_t *from, uint64_t *until);
CUresult race_check(const char *fn, const char *what, uintptr_t p, size_t n, int write, uint64_t from,
                    uint64_t until);
void race_note(uintptr_t p, size_t n, int write, int device, uint64_t from, uint64_t until);
CUresult race_copy(const char *fn, const char *what, const struct fake_stream *s, const void *host, size_t n,
                   int write);
void race_forget(uintptr_t p, size_t n);

/* The kernels cuModuleGetFunction knows (fake_modules.c) and cuLaunchKernel
 * runs (fake_launch.c, which describes each). */
enum { KERNEL_COPY_SEGMENTS = 1, KERNEL_DEBUG_FILL = 2, KERNEL_DEBUG_COPY = 3, KERNEL_SCATTER_SEGMENTS = 4 };
enum { KERNEL_PTX_RECORD = 10, KERNEL_PTX_ADD_ONE_F32 = 11, KERNEL_PTX_SCALE_ADD_F32 = 12 };

/* The last PTX launch (lock held to touch; fake_launch.c). */
struct fake_last_launch {
  int valid;
  unsigned int dims[8]; /* grid x y z, block x y z, shared bytes, parameters */
  uintptr_t stream;
  unsigned int bytes;
  unsigned char params[4096];
};
extern struct fake_last_launch g_last_launch;

/* fake_modules.c. Lock held: drops functions whose module is gone. */
void drop_orphan_functions(void);

#pragma GCC visibility pop

#endif
