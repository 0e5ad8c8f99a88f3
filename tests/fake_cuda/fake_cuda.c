/*
 * fake_cuda.c: an emulated CUDA driver (libcuda.so.1) for libmtc's tests.
 *
 * CI machines have no GPU, so tests point MTC_CUDA_DRIVER at libfakecuda.so,
 * built from this file alone, and libmtc drives it as it drives the real
 * driver. Device memory is host memory, copies are memcpy, and a small time
 * model makes asynchrony observable.
 *
 * The emulation is deliberately strict: every handle, context and copy range
 * is checked, and every failed call prints one line on stderr naming the call
 * and the reason, so that bugs in libmtc show up as errors, not as silent
 * success. Handles are never dereferenced before they are found in a
 * registry, so a bad handle gives CUDA_ERROR_INVALID_HANDLE, never a crash.
 *
 * Environment, read once by the first cuInit (sizes take a k/m/g suffix):
 *   FAKE_CUDA_DEVICE_COUNT          devices, 0..64 (default 1)
 *   FAKE_CUDA_DEVICE_MEMORY_BYTES   memory per device (default 8g)
 *   FAKE_CUDA_PINNED_MEMORY_BYTES   pinned host memory in all (default: no limit)
 *   FAKE_CUDA_COPY_DELAY_US         modelled duration of each copy (default 0)
 *   FAKE_CUDA_QUIET                 1: no stderr line for failed calls
 *   FAKE_CUDA_LOG                   a file: failed calls' lines are appended
 *                                   there instead of stderr (the test script
 *                                   shows them when a suite fails)
 *
 * Time model: each stream has busy_until (CLOCK_MONOTONIC, ns). A copy does
 * its memcpy at once and moves busy_until to max(busy_until, now) + delay.
 * cuEventRecord captures busy_until; queries and synchronizes compare with,
 * or sleep until, that time. Copies from or to pageable (not cuMemHostAlloc)
 * host memory block the caller until the copy's modelled end, as the real
 * driver does.
 *
 * Kernels: cuModuleLoadData accepts a fatbin, an ELF cubin, PTX text or the
 * test builds' stand-in image, and fails others with INVALID_IMAGE;
 * cuModuleGetFunction knows the kernels of libmtc's cuda/ kernels by name in
 * binary images and the .entry kernels of PTX text, and cuLaunchKernel runs
 * them on the host (see "kernels" below) with the same checks and time model
 * as copies.
 */
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

/* The legacy and per-thread default streams, as cuda.h defines them. */
#define FAKE_STREAM_LEGACY ((uintptr_t)0x1)
#define FAKE_STREAM_PER_THREAD ((uintptr_t)0x2)

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

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_init_state;           /* INIT_*; read without the lock */
static int g_device_count;
static uint64_t g_device_mem_limit;       /* per device */
static uint64_t g_pinned_limit;           /* 0: no limit */
static uint64_t g_pinned_used;
static uint64_t g_copy_delay_ns;
/* fake_cuda_set_copy_delay_us was called: cuInit keeps its value. */
static int g_copy_delay_set;
static unsigned long long g_copy_count;
static unsigned long long g_pageable_copy_count;
static unsigned long long g_launch_count;
static CUresult g_module_load_error; /* fake_cuda_fail_module_loads */
static struct fake_ctx g_ctx[FAKE_MAX_DEVICES];
static struct alloc_list g_dev_allocs, g_host_allocs;

/* Per-thread context stack; the top is the current context. */
static _Thread_local struct fake_ctx *t_ctx_stack[FAKE_MAX_CTX_DEPTH];
static _Thread_local int t_ctx_depth;

static void lock(void) { pthread_mutex_lock(&g_lock); }
static void unlock(void) { pthread_mutex_unlock(&g_lock); }

/* ============================================================== reporting */

static int g_quiet;
static int g_log_fd = -1; /* FAKE_CUDA_LOG, or -1 for stderr */
static pthread_once_t g_quiet_once = PTHREAD_ONCE_INIT;

static void read_quiet(void) {
  const char *s = getenv("FAKE_CUDA_QUIET");
  g_quiet = s && *s && strcmp(s, "0") != 0;
  const char *log = getenv("FAKE_CUDA_LOG");
  if (!g_quiet && log && *log) {
    g_log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (g_log_fd < 0) fprintf(stderr, "fake_cuda: cannot open FAKE_CUDA_LOG=%s: %s\n", log, strerror(errno));
  }
}

/* Prints "fake_cuda: <fn>: <why>" on stderr, or appends it to FAKE_CUDA_LOG,
 * and returns r. One write per line, so that the lines of processes sharing
 * the log do not mix. */
__attribute__((format(printf, 3, 4))) static CUresult report(CUresult r, const char *fn,
                                                             const char *fmt, ...) {
  pthread_once(&g_quiet_once, read_quiet);
  if (!g_quiet) {
    char why[512], line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "fake_cuda: %s: %s\n", fn, why);
    if (n < 0) return r;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    if (g_log_fd >= 0) {
      ssize_t written = write(g_log_fd, line, (size_t)n);
      (void)written; /* a test log that cannot be written is not worth failing a call for */
    } else {
      fputs(line, stderr);
    }
  }
  return r;
}

/* =================================================================== time */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
  struct timespec ts;
  ts.tv_sec = (time_t)(t / 1000000000u);
  ts.tv_nsec = (long)(t % 1000000000u);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

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

static struct slot *g_slots;
static uint32_t g_slot_count, g_slot_cap;
static uint32_t g_free_slot = NO_SLOT;
static int g_live[KIND_COUNT];

/* Registers obj; returns its handle, or 0 when the table is full. */
static uintptr_t handle_new(int kind, void *obj) {
  uint32_t i;
  if (g_free_slot != NO_SLOT) {
    i = g_free_slot;
    g_free_slot = g_slots[i].next_free;
  } else {
    if (g_slot_count == H_MAX_SLOTS) return 0;
    if (g_slot_count == g_slot_cap) {
      uint32_t cap = g_slot_cap ? g_slot_cap * 2 : 64;
      struct slot *s = realloc(g_slots, (size_t)cap * sizeof *s);
      if (!s) return 0;
      g_slots = s;
      g_slot_cap = cap;
    }
    i = g_slot_count++;
    g_slots[i].gen = 1;
  }
  g_slots[i].obj = obj;
  g_slots[i].kind = kind;
  g_live[kind]++;
  return ((uintptr_t)kind << H_KIND_SHIFT) |
         ((uintptr_t)(g_slots[i].gen & H_GEN_MASK) << H_IDX_BITS) | (uintptr_t)(i + 1);
}

/* The object behind handle h of the given kind, or NULL. Writes its slot. */
static void *handle_get(int kind, const void *h, uint32_t *out_slot) {
  uintptr_t v = (uintptr_t)h;
  if ((v >> H_KIND_SHIFT) != (uintptr_t)kind) return NULL;
  uint32_t i = (uint32_t)(v & H_IDX_MASK);
  if (i == 0 || i > g_slot_count) return NULL;
  i--;
  if (g_slots[i].kind != kind || (g_slots[i].gen & H_GEN_MASK) != ((v >> H_IDX_BITS) & H_GEN_MASK))
    return NULL;
  if (out_slot) *out_slot = i;
  return g_slots[i].obj;
}

static void drop_orphan_functions(void);

/* Frees the object in slot i and makes its handle stale. */
static void handle_drop(uint32_t i) {
  g_live[g_slots[i].kind]--;
  free(g_slots[i].obj);
  g_slots[i].obj = NULL;
  g_slots[i].kind = 0;
  g_slots[i].gen++;
  g_slots[i].next_free = g_free_slot;
  g_free_slot = i;
}

/* ===================================================== allocation registry */

/* Index of the first allocation that starts above addr. */
static size_t alloc_upper(const struct alloc_list *l, uintptr_t addr) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->v[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The allocation that holds byte p, or NULL. */
static struct fake_alloc *alloc_containing(struct alloc_list *l, uintptr_t p) {
  size_t i = alloc_upper(l, p);
  if (i == 0) return NULL;
  struct fake_alloc *a = &l->v[i - 1];
  return p - a->addr < a->size ? a : NULL;
}

/* An allocation that overlaps [p, p + n), n > 0, or NULL. */
static struct fake_alloc *alloc_overlapping(struct alloc_list *l, uintptr_t p, size_t n) {
  uintptr_t last = n - 1 > UINTPTR_MAX - p ? UINTPTR_MAX : p + (n - 1);
  size_t i = alloc_upper(l, last);
  if (i == 0) return NULL;
  struct fake_alloc *a = &l->v[i - 1];
  return a->addr + a->size > p ? a : NULL;
}

static int alloc_insert(struct alloc_list *l, const struct fake_alloc *a) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    struct fake_alloc *v = realloc(l->v, cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  size_t i = alloc_upper(l, a->addr);
  memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *a);
  l->v[i] = *a;
  l->n++;
  return 0;
}

static void alloc_remove(struct alloc_list *l, struct fake_alloc *a) {
  size_t i = (size_t)(a - l->v);
  memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *a);
  l->n--;
}

/* Poisons, then frees, so that use after free reads 0xDB bytes. */
static void poison_free(uintptr_t addr, size_t size) {
  memset((void *)addr, 0xDB, size);
  free((void *)addr);
}

/* ============================================================ common checks */

static CUresult need_init(const char *fn) {
  if (atomic_load(&g_init_state) == INIT_OK) return CUDA_SUCCESS;
  return report(CUDA_ERROR_NOT_INITIALIZED, fn, "cuInit(0) has not succeeded");
}

/* The context behind a CUcontext handle, or NULL. */
static struct fake_ctx *ctx_from_handle(CUcontext h) {
  uintptr_t v = (uintptr_t)h, base = (uintptr_t)g_ctx;
  if (v < base || v >= base + (uintptr_t)g_device_count * sizeof g_ctx[0]) return NULL;
  if ((v - base) % sizeof g_ctx[0] != 0) return NULL;
  return &g_ctx[(v - base) / sizeof g_ctx[0]];
}

static struct fake_ctx *current_ctx(void) {
  return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL;
}

/* Lock held. The calling thread's current, active context. */
static CUresult need_ctx(const char *fn, struct fake_ctx **out) {
  struct fake_ctx *c = current_ctx();
  if (!c) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "no current context on this thread");
  if (c->refcount == 0)
    return report(CUDA_ERROR_INVALID_CONTEXT, fn,
                  "the current context (device %d) was released by cuDevicePrimaryCtxRelease",
                  c->device);
  *out = c;
  return CUDA_SUCCESS;
}

static int is_null_stream(CUstream h) {
  uintptr_t v = (uintptr_t)h;
  return v == 0 || v == FAKE_STREAM_LEGACY || v == FAKE_STREAM_PER_THREAD;
}

/* Lock held. Resolves h (NULL: cur's default stream). With same_ctx the
 * stream must belong to cur's device. */
static CUresult get_stream(const char *fn, CUstream h, struct fake_ctx *cur, int same_ctx,
                           struct fake_stream **out) {
  if (is_null_stream(h)) {
    if (!cur) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "the NULL stream needs a current context");
    *out = &cur->null_stream;
    return CUDA_SUCCESS;
  }
  struct fake_stream *s = handle_get(KIND_STREAM, h, NULL);
  if (!s)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "stream %p is not a live stream (destroyed or never created)",
                  (void *)h);
  if (same_ctx && s->device != cur->device)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "stream belongs to device %d, current context is device %d",
                  s->device, cur->device);
  *out = s;
  return CUDA_SUCCESS;
}

/* Lock held. Same as get_stream for events (never NULL). */
static CUresult get_event(const char *fn, CUevent h, struct fake_ctx *cur, struct fake_event **out,
                          uint32_t *out_slot) {
  struct fake_event *e = handle_get(KIND_EVENT, h, out_slot);
  if (!e)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "event %p is not a live event (destroyed or never created)",
                  (void *)h);
  if (cur && e->device != cur->device)
    return report(CUDA_ERROR_INVALID_HANDLE, fn, "event belongs to device %d, current context is device %d",
                  e->device, cur->device);
  *out = e;
  return CUDA_SUCCESS;
}

/* Lock held. [p, p + n), n > 0, must lie inside one live allocation of device. */
static CUresult check_device_range(const char *fn, const char *what, CUdeviceptr p, size_t n,
                                   int device) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (!a) {
    if (alloc_containing(&g_host_allocs, (uintptr_t)p))
      return report(CUDA_ERROR_INVALID_VALUE, fn,
                    "%s 0x%llx (%zu bytes) is pinned host memory, not a device allocation", what, p, n);
    return report(CUDA_ERROR_INVALID_VALUE, fn, "%s 0x%llx (%zu bytes) is not inside any live device allocation",
                  what, p, n);
  }
  if (a->device != device)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx (%zu bytes) is memory of device %d, the copy needs device %d", what, p, n,
                  a->device, device);
  size_t room = a->size - (size_t)((uintptr_t)p - a->addr);
  if (n > room)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx (%zu bytes) runs %zu bytes past the end of its allocation 0x%" PRIxPTR
                  " (%zu bytes)",
                  what, p, n, n - room, a->addr, a->size);
  if (a->epoch != g_ctx[device].epoch)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s 0x%llx was allocated before device %d's primary context was last released", what, p,
                  device);
  return CUDA_SUCCESS;
}

/* Lock held. The host side of a copy, n > 0: not NULL and not device memory
 * (a swapped argument would otherwise pass, device memory being host memory
 * here). *pinned says whether it lies inside one cuMemHostAlloc block. */
static CUresult check_host_range(const char *fn, const char *what, const void *h, size_t n, int *pinned) {
  if (!h) return report(CUDA_ERROR_INVALID_VALUE, fn, "%s host pointer is NULL (%zu bytes)", what, n);
  struct fake_alloc *d = alloc_overlapping(&g_dev_allocs, (uintptr_t)h, n);
  if (d)
    return report(CUDA_ERROR_INVALID_VALUE, fn,
                  "%s host range %p (%zu bytes) overlaps device %d allocation 0x%" PRIxPTR
                  " (%zu bytes): a device pointer passed as host pointer?",
                  what, h, n, d->device, d->addr, d->size);
  struct fake_alloc *a = alloc_containing(&g_host_allocs, (uintptr_t)h);
  *pinned = a && n <= a->size - (size_t)((uintptr_t)h - a->addr);
  return CUDA_SUCCESS;
}

/* Lock held. Queues one copy on s. Returns the time the caller must sleep
 * until (a copy with pageable host memory blocks), or 0. */
static uint64_t stream_enqueue_copy(struct fake_stream *s, int blocking) {
  s->busy_until = max_u64(s->busy_until, now_ns()) + g_copy_delay_ns;
  g_copy_count++;
  if (!blocking) return 0;
  g_pageable_copy_count++;
  return s->busy_until;
}

/* ================================================================== errors */

static const struct {
  CUresult code;
  const char *name;
  const char *text;
} k_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* Like the real driver: an unknown code gives INVALID_VALUE and *p = NULL. */
static CUresult lookup_error(CUresult error, const char **p, int want_name) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++) {
    if (k_errors[i].code == error) {
      *p = want_name ? k_errors[i].name : k_errors[i].text;
      return CUDA_SUCCESS;
    }
  }
  *p = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **pStr) { return lookup_error(error, pStr, 1); }

FAKE_API CUresult cuGetErrorString(CUresult error, const char **pStr) { return lookup_error(error, pStr, 0); }

/* ========================================================= initialization */

/* A decimal size with an optional k/m/g (binary) suffix; dflt when unset. */
static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t max) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  uint64_t mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = UINT64_C(1) << 10; end++; break;
  case 'm': case 'M': mul = UINT64_C(1) << 20; end++; break;
  case 'g': case 'G': mul = UINT64_C(1) << 30; end++; break;
  default: break;
  }
  if (s[0] < '0' || s[0] > '9' || errno || *end || v > max / mul) {
    fprintf(stderr, "fake_cuda: ignoring %s=%s (want a number up to %llu)\n", name, s,
            (unsigned long long)max);
    return dflt;
  }
  return v * mul;
}

FAKE_API CUresult cuInit(unsigned int Flags) {
  if (Flags != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags must be 0, got %u", Flags);
  lock();
  if (atomic_load(&g_init_state) == INIT_NONE) {
    g_device_count = (int)env_u64("FAKE_CUDA_DEVICE_COUNT", 1, FAKE_MAX_DEVICES);
    g_device_mem_limit = env_u64("FAKE_CUDA_DEVICE_MEMORY_BYTES", UINT64_C(8) << 30, UINT64_MAX);
    g_pinned_limit = env_u64("FAKE_CUDA_PINNED_MEMORY_BYTES", 0, UINT64_MAX);
    if (!g_copy_delay_set) g_copy_delay_ns = env_u64("FAKE_CUDA_COPY_DELAY_US", 0, UINT64_C(1) << 40) * 1000u;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
      g_ctx[d].device = d;
      g_ctx[d].null_stream.device = d;
    }
    atomic_store(&g_init_state, g_device_count > 0 ? INIT_OK : INIT_NO_DEVICE);
  }
  int state = atomic_load(&g_init_state);
  unlock();
  if (state != INIT_OK) return report(CUDA_ERROR_NO_DEVICE, __func__, "FAKE_CUDA_DEVICE_COUNT is 0");
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *driverVersion) {
  if (!driverVersion) return report(CUDA_ERROR_INVALID_VALUE, __func__, "driverVersion is NULL");
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

/* ================================================================ devices */

FAKE_API CUresult cuDeviceGetCount(int *count) {
  /* After cuInit found no device, the count (0) is still readable. */
  if (atomic_load(&g_init_state) == INIT_NO_DEVICE && count) {
    *count = 0;
    return CUDA_SUCCESS;
  }
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!count) return report(CUDA_ERROR_INVALID_VALUE, __func__, "count is NULL");
  *count = g_device_count;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!device) return report(CUDA_ERROR_INVALID_VALUE, __func__, "device is NULL");
  if (ordinal < 0 || ordinal >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "ordinal %d, there are %d devices", ordinal,
                  g_device_count);
  *device = ordinal;
  return CUDA_SUCCESS;
}

/* ================================================================ contexts */

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pctx is NULL");
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  lock();
  struct fake_ctx *c = &g_ctx[dev];
  if (c->refcount++ == 0) {
    c->epoch++;
    c->null_stream.busy_until = 0;
    /* A fresh context has no peer access, and no other context has access
     * to it. */
    c->peer_mask = 0;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) g_ctx[d].peer_mask &= ~(UINT64_C(1) << dev);
  }
  unlock();
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (dev < 0 || dev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "device %d, there are %d devices", dev, g_device_count);
  lock();
  struct fake_ctx *c = &g_ctx[dev];
  if (c->refcount == 0) {
    r = report(CUDA_ERROR_INVALID_CONTEXT, __func__, "device %d's primary context is not retained", dev);
  } else if (--c->refcount == 0) {
    /* The context goes away with its streams and events, as in the real
     * driver. Device allocations stay registered (and unusable) so leak
     * checks still see them. */
    int streams = 0, events = 0;
    for (uint32_t i = 0; i < g_slot_count; i++) {
      int k = g_slots[i].kind;
      if (k == KIND_STREAM && ((struct fake_stream *)g_slots[i].obj)->device == dev) {
        streams++;
        handle_drop(i);
      } else if (k == KIND_EVENT && ((struct fake_event *)g_slots[i].obj)->device == dev) {
        events++;
        handle_drop(i);
      } else if (k == KIND_MODULE && ((struct fake_module *)g_slots[i].obj)->device == dev) {
        /* Modules go with their context (functions fail the module check). */
        handle_drop(i);
      }
    }
    drop_orphan_functions();
    size_t allocs = 0;
    for (size_t i = 0; i < g_dev_allocs.n; i++) allocs += g_dev_allocs.v[i].device == dev;
    if (streams || events || allocs)
      report(CUDA_SUCCESS, __func__,
             "note: device %d's primary context released with %d streams, %d events and %zu device "
             "allocations alive",
             dev, streams, events, allocs);
  }
  unlock();
  return r;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pctx is NULL");
  *pctx = (CUcontext)current_ctx();
  return CUDA_SUCCESS;
}

/* Lock held. ctx must be a primary context that is retained. */
static CUresult check_ctx_handle(const char *fn, CUcontext ctx, struct fake_ctx **out) {
  struct fake_ctx *c = ctx_from_handle(ctx);
  if (!c) return report(CUDA_ERROR_INVALID_CONTEXT, fn, "%p is not a context", (void *)ctx);
  if (c->refcount == 0)
    return report(CUDA_ERROR_INVALID_CONTEXT, fn, "device %d's primary context is not retained", c->device);
  *out = c;
  return CUDA_SUCCESS;
}

/* NULL pops the stack; otherwise ctx replaces the top (or is pushed). */
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!ctx) {
    if (t_ctx_depth) t_ctx_depth--;
    return CUDA_SUCCESS;
  }
  struct fake_ctx *c;
  lock();
  r = check_ctx_handle(__func__, ctx, &c);
  unlock();
  if (r) return r;
  if (t_ctx_depth == 0) t_ctx_depth = 1;
  t_ctx_stack[t_ctx_depth - 1] = c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!ctx) return report(CUDA_ERROR_INVALID_VALUE, __func__, "ctx is NULL");
  if (t_ctx_depth == FAKE_MAX_CTX_DEPTH)
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "context stack deeper than %d: push/pop mismatch?",
                  FAKE_MAX_CTX_DEPTH);
  struct fake_ctx *c;
  lock();
  r = check_ctx_handle(__func__, ctx, &c);
  unlock();
  if (r) return r;
  t_ctx_stack[t_ctx_depth++] = c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (t_ctx_depth == 0) return report(CUDA_ERROR_INVALID_CONTEXT, __func__, "the context stack is empty");
  struct fake_ctx *c = t_ctx_stack[--t_ctx_depth];
  if (pctx) *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *device) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!device) return report(CUDA_ERROR_INVALID_VALUE, __func__, "device is NULL");
  struct fake_ctx *c;
  lock();
  r = need_ctx(__func__, &c);
  unlock();
  if (r) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

/* ================================================================= streams */

FAKE_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!phStream) return report(CUDA_ERROR_INVALID_VALUE, __func__, "phStream is NULL");
  if (Flags > 1) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0 or 1)", Flags);
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) {
    struct fake_stream *s = calloc(1, sizeof *s);
    uintptr_t h = s ? handle_new(KIND_STREAM, s) : 0;
    if (!h) {
      free(s);
      r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another stream");
    } else {
      s->device = c->device;
      s->flags = Flags;
      *phStream = (CUstream)h;
    }
  }
  unlock();
  return r;
}

/* Pending copies need not finish: the handle dies at once, the work lives on. */
FAKE_API CUresult cuStreamDestroy_v2(CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_STREAM, hStream, &slot))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "stream %p is not a live stream (destroyed or never created)",
               (void *)hStream);
  else
    handle_drop(slot);
  unlock();
  return r;
}

FAKE_API CUresult cuStreamSynchronize(CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s;
  uint64_t until = 0;
  lock();
  if (is_null_stream(hStream)) {
    if (!(r = need_ctx(__func__, &c))) until = c->null_stream.busy_until;
  } else if (!(r = get_stream(__func__, hStream, NULL, 0, &s))) {
    until = s->busy_until;
  }
  unlock();
  if (r) return r;
  sleep_until(until);
  return CUDA_SUCCESS;
}

/* The event may come from any device: cross-device waits are legal. */
FAKE_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (Flags != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0)", Flags);
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  struct fake_event *e;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 0, &s)) &&
      !(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded)
    s->busy_until = max_u64(s->busy_until, e->ready_at);
  unlock();
  return r;
}

/* ================================================================== events */

FAKE_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!phEvent) return report(CUDA_ERROR_INVALID_VALUE, __func__, "phEvent is NULL");
  /* BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4 (needs DISABLE_TIMING). */
  if (Flags > 7 || ((Flags & 4) && !(Flags & 2)))
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags 0x%x", Flags);
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) {
    struct fake_event *e = calloc(1, sizeof *e);
    uintptr_t h = e ? handle_new(KIND_EVENT, e) : 0;
    if (!h) {
      free(e);
      r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another event");
    } else {
      e->device = c->device;
      e->flags = Flags;
      *phEvent = (CUevent)h;
    }
  }
  unlock();
  return r;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint32_t slot;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, &slot))) handle_drop(slot);
  unlock();
  return r;
}

FAKE_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_event *e;
  struct fake_stream *s;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_event(__func__, hEvent, c, &e, NULL)) &&
      !(r = get_stream(__func__, hStream, c, 1, &s))) {
    e->recorded = 1;
    e->ready_at = s->busy_until;
  }
  unlock();
  return r;
}

/* Polled in loops: one lock, one table lookup, one clock read. */
FAKE_API CUresult cuEventQuery(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint64_t ready_at = 0;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded) ready_at = e->ready_at;
  unlock();
  if (r) return r;
  return ready_at > now_ns() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

FAKE_API CUresult cuEventSynchronize(CUevent hEvent) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_event *e;
  uint64_t ready_at = 0;
  lock();
  if (!(r = get_event(__func__, hEvent, NULL, &e, NULL)) && e->recorded) ready_at = e->ready_at;
  unlock();
  if (r) return r;
  sleep_until(ready_at);
  return CUDA_SUCCESS;
}

/* ========================================================== pinned memory */

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!pp) return report(CUDA_ERROR_INVALID_VALUE, __func__, "pp is NULL");
  /* PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4, and 8. */
  if (Flags > 15) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags 0x%x", Flags);
  if (bytesize == 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "bytesize is 0");
  struct fake_ctx *c;
  lock();
  if ((r = need_ctx(__func__, &c))) goto out;
  if (g_pinned_limit && bytesize > g_pinned_limit - g_pinned_used) {
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__,
               "%zu bytes asked, %" PRIu64 " of %" PRIu64 " pinned bytes in use (FAKE_CUDA_PINNED_MEMORY_BYTES)",
               bytesize, g_pinned_used, g_pinned_limit);
    goto out;
  }
  /* Page aligned like real pinned memory; C11 wants a multiple of the alignment. */
  void *p = bytesize <= SIZE_MAX - 4095 ? aligned_alloc(4096, (bytesize + 4095) & ~(size_t)4095) : NULL;
  struct fake_alloc a = {(uintptr_t)p, bytesize, -1, 0, 0};
  if (!p || alloc_insert(&g_host_allocs, &a)) {
    free(p);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "host allocation of %zu bytes failed", bytesize);
    goto out;
  }
  memset(p, 0xCD, bytesize); /* never zero, like fresh real memory may be */
  g_pinned_used += bytesize;
  *pp = p;
out:
  unlock();
  return r;
}

FAKE_API CUresult cuMemFreeHost(void *p) {
  CUresult r = need_init(__func__);
  if (r) return r;
  lock();
  struct fake_alloc *a = alloc_containing(&g_host_allocs, (uintptr_t)p);
  if (!a || a->addr != (uintptr_t)p) {
    if (a)
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p points inside pinned block 0x%" PRIxPTR ", not at its start",
                 p, a->addr);
    else if (alloc_containing(&g_dev_allocs, (uintptr_t)p))
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p is device memory (use cuMemFree)", p);
    else
      r = report(CUDA_ERROR_INVALID_VALUE, __func__, "%p is not a live cuMemHostAlloc block (double free?)", p);
  } else {
    uintptr_t addr = a->addr;
    size_t size = a->size;
    g_pinned_used -= size;
    alloc_remove(&g_host_allocs, a);
    poison_free(addr, size);
  }
  unlock();
  return r;
}

/* ========================================================== device memory */

/* Lock held. Allocates size bytes on device, counted against its limit and
 * the pool's (when pool is not NULL). */
static CUresult device_alloc(const char *fn, int device, size_t size, struct fake_pool *pool,
                             uintptr_t pool_handle, CUdeviceptr *out) {
  struct fake_ctx *d = &g_ctx[device];
  if (size == 0) return report(CUDA_ERROR_INVALID_VALUE, fn, "bytesize is 0");
  if (size > g_device_mem_limit - d->used_bytes)
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn,
                  "device %d: %zu bytes asked, %" PRIu64 " of %" PRIu64
                  " bytes in use (FAKE_CUDA_DEVICE_MEMORY_BYTES)",
                  device, size, d->used_bytes, g_device_mem_limit);
  if (pool && pool->max_size && size > pool->max_size - pool->used)
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn,
                  "pool of device %d: %zu bytes asked, %" PRIu64 " of maxSize %" PRIu64 " in use", device, size,
                  pool->used, pool->max_size);
  void *p = size <= SIZE_MAX - 255 ? aligned_alloc(256, (size + 255) & ~(size_t)255) : NULL;
  struct fake_alloc a = {(uintptr_t)p, size, device, d->epoch, pool_handle};
  if (!p || alloc_insert(&g_dev_allocs, &a)) {
    free(p);
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "host allocation of %zu bytes failed", size);
  }
  memset(p, 0xCD, size); /* uninitialized device memory is not zero */
  d->used_bytes += size;
  if (pool) pool->used += size;
  *out = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* Lock held. Frees the allocation starting at p; device >= 0: it must be
 * memory of that device. */
static CUresult device_free(const char *fn, CUdeviceptr p, int device) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (!a || a->addr != (uintptr_t)p) {
    if (a)
      return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx points inside allocation 0x%" PRIxPTR ", not at its start",
                    p, a->addr);
    if (alloc_containing(&g_host_allocs, (uintptr_t)p))
      return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is pinned host memory (use cuMemFreeHost)", p);
    return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is not a live device allocation (double free?)", p);
  }
  if (device >= 0 && a->device != device)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "0x%llx is memory of device %d, the stream is on device %d", p,
                  a->device, device);
  g_ctx[a->device].used_bytes -= a->size;
  struct fake_pool *pool = a->pool ? handle_get(KIND_POOL, (void *)a->pool, NULL) : NULL;
  if (pool) pool->used -= a->size;
  uintptr_t addr = a->addr;
  size_t size = a->size;
  alloc_remove(&g_dev_allocs, a);
  poison_free(addr, size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!dptr) return report(CUDA_ERROR_INVALID_VALUE, __func__, "dptr is NULL");
  struct fake_ctx *c;
  lock();
  if (!(r = need_ctx(__func__, &c))) r = device_alloc(__func__, c->device, bytesize, NULL, 0, dptr);
  unlock();
  return r;
}

/* Memory of any device, with or without a current context. */
FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult r = need_init(__func__);
  if (r) return r;
  lock();
  r = device_free(__func__, dptr, -1);
  unlock();
  return r;
}

/* ============================================================ memory pools */

FAKE_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!pool || !poolProps) return report(CUDA_ERROR_INVALID_VALUE, fn, "pool or poolProps is NULL");
  const CUmemPoolProps *p = poolProps;
  if (p->allocType != 1)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "allocType %d (want 1, CU_MEM_ALLOCATION_TYPE_PINNED)",
                  p->allocType);
  /* NONE 0, POSIX_FILE_DESCRIPTOR 1, FABRIC 8; the win32 kinds do not exist on Linux. */
  if (p->handleTypes & ~(1 | 8))
    return report(CUDA_ERROR_INVALID_VALUE, fn, "handleTypes 0x%x", (unsigned)p->handleTypes);
  if (p->location.type != 1)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "location.type %d (want 1, CU_MEM_LOCATION_TYPE_DEVICE)",
                  p->location.type);
  if (p->location.id < 0 || p->location.id >= g_device_count)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "location.id %d, there are %d devices", p->location.id,
                  g_device_count);
  if (p->usage != 0 && p->usage != 2) return report(CUDA_ERROR_INVALID_VALUE, fn, "usage 0x%x", p->usage);
  /* Nonzero reserved bytes usually mean the struct was not zeroed. */
  for (size_t i = 0; i < sizeof p->reserved; i++)
    if (p->reserved[i])
      return report(CUDA_ERROR_INVALID_VALUE, fn, "reserved[%zu] is %u, must be 0 (struct not zeroed?)", i,
                    p->reserved[i]);
  struct fake_pool *pl = calloc(1, sizeof *pl);
  if (!pl) return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  pl->device = p->location.id;
  pl->max_size = p->maxSize;
  pl->access[pl->device] = 3;
  lock();
  uintptr_t h = handle_new(KIND_POOL, pl);
  unlock();
  if (!h) {
    free(pl);
    return report(CUDA_ERROR_OUT_OF_MEMORY, fn, "no room for another pool");
  }
  *pool = (CUmemoryPool)h;
  return CUDA_SUCCESS;
}

/* Allocations still out live on (and stay freeable), as in the real driver. */
FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_POOL, pool, &slot))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
  else
    handle_drop(slot);
  unlock();
  return r;
}

/* Attributes 1..8 (CU_MEMPOOL_ATTR_*). 5 and 7 (RESERVED_MEM_CURRENT,
 * USED_MEM_CURRENT) are read-only; 6 and 8 (the high marks) only reset to 0. */
FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (attr < 1 || attr > 8) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d (want 1..8)", attr);
  if (!value) return report(CUDA_ERROR_INVALID_VALUE, __func__, "value is NULL");
  if (attr == 5 || attr == 7) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d is read-only", attr);
  if (attr == 6 || attr == 8) {
    uint64_t v;
    memcpy(&v, value, sizeof v);
    if (v != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "attr %d can only be reset to 0", attr);
  }
  lock();
  if (!handle_get(KIND_POOL, pool, NULL))
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
  unlock();
  return r;
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                          CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!dptr) return report(CUDA_ERROR_INVALID_VALUE, __func__, "dptr is NULL");
  struct fake_ctx *c;
  struct fake_stream *s;
  lock();
  if ((r = need_ctx(__func__, &c)) || (r = get_stream(__func__, hStream, c, 1, &s))) goto out;
  struct fake_pool *pl = handle_get(KIND_POOL, pool, NULL);
  if (!pl) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
    goto out;
  }
  if (pl->device != s->device) {
    r = report(CUDA_ERROR_INVALID_VALUE, __func__, "pool belongs to device %d, stream to device %d", pl->device,
               s->device);
    goto out;
  }
  r = device_alloc(__func__, pl->device, bytesize, pl, (uintptr_t)pool, dptr);
out:
  unlock();
  return r;
}

/* Frees at once (stricter than stream order: later use fails at once). */
FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)))
    r = device_free(__func__, dptr, s->device);
  unlock();
  return r;
}

/* ================================================================= copies
 * Validation and the time model run under the lock; the memcpy runs after
 * it. n == 0 copies skip the range checks and succeed. */

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  int pinned = 1;
  uint64_t wait = 0;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, c->device)))
    r = check_host_range(__func__, "source", srcHost, ByteCount, &pinned);
  if (!r) wait = stream_enqueue_copy(s, !pinned);
  unlock();
  if (r) return r;
  if (ByteCount) memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  if (wait) sleep_until(wait);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  int pinned = 1;
  uint64_t wait = 0;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "source", srcDevice, ByteCount, c->device)))
    r = check_host_range(__func__, "destination", dstHost, ByteCount, &pinned);
  if (!r) wait = stream_enqueue_copy(s, !pinned);
  unlock();
  if (r) return r;
  if (ByteCount) memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  if (wait) sleep_until(wait);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                       CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && ByteCount &&
      !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, c->device)))
    r = check_device_range(__func__, "source", srcDevice, ByteCount, c->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (ByteCount) memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                    CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c, *dc, *sc;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) &&
      !(r = check_ctx_handle(__func__, dstContext, &dc)) && !(r = check_ctx_handle(__func__, srcContext, &sc)) &&
      ByteCount && !(r = check_device_range(__func__, "destination", dstDevice, ByteCount, dc->device)))
    r = check_device_range(__func__, "source", srcDevice, ByteCount, sc->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (ByteCount) memmove((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

/* ============================================================ peer access */

FAKE_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!canAccessPeer) return report(CUDA_ERROR_INVALID_VALUE, __func__, "canAccessPeer is NULL");
  if (dev < 0 || dev >= g_device_count || peerDev < 0 || peerDev >= g_device_count)
    return report(CUDA_ERROR_INVALID_DEVICE, __func__, "devices %d and %d, there are %d devices", dev, peerDev,
                  g_device_count);
  /* Every two distinct devices are peers here; a device is not its own peer. */
  *canAccessPeer = dev != peerDev;
  return CUDA_SUCCESS;
}

/* Gives the current context access to peerContext's cuMemAlloc memory in
 * kernels. Reset when either context is next activated. */
FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (Flags != 0) return report(CUDA_ERROR_INVALID_VALUE, __func__, "Flags %u (want 0)", Flags);
  struct fake_ctx *c, *peer;
  lock();
  if ((r = need_ctx(__func__, &c)) || (r = check_ctx_handle(__func__, peerContext, &peer))) goto out;
  if (peer == c) {
    r = report(CUDA_ERROR_INVALID_DEVICE, __func__, "peerContext is the current context (device %d)", c->device);
  } else if (c->peer_mask & (UINT64_C(1) << peer->device)) {
    /* Not an error worth a line: callers expect it on the second call. */
    r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  } else {
    c->peer_mask |= UINT64_C(1) << peer->device;
  }
out:
  unlock();
  return r;
}

/* Validates every entry before applying any. The owner keeps READWRITE. */
FAKE_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!map) return report(CUDA_ERROR_INVALID_VALUE, fn, "map is NULL (count %zu)", count);
  lock();
  struct fake_pool *pl = handle_get(KIND_POOL, pool, NULL);
  if (!pl) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "pool %p is not a live pool (destroyed or never created)",
               (void *)pool);
    goto out;
  }
  for (size_t i = 0; i < count && !r; i++) {
    const CUmemAccessDesc *d = &map[i];
    if (d->location.type != 1)
      r = report(CUDA_ERROR_INVALID_VALUE, fn, "map[%zu].location.type %d (want 1, CU_MEM_LOCATION_TYPE_DEVICE)", i,
                 d->location.type);
    else if (d->location.id < 0 || d->location.id >= g_device_count)
      r = report(CUDA_ERROR_INVALID_DEVICE, fn, "map[%zu].location.id %d, there are %d devices", i, d->location.id,
                 g_device_count);
    else if (d->flags != 0 && d->flags != 1 && d->flags != 3)
      r = report(CUDA_ERROR_INVALID_VALUE, fn, "map[%zu].flags %d (want 0, 1 or 3: CU_MEM_ACCESS_FLAGS_PROT_*)", i,
                 d->flags);
    else if (d->location.id == pl->device && d->flags != 3)
      r = report(CUDA_ERROR_INVALID_VALUE, fn,
                 "map[%zu] takes access away from the pool's own device %d (flags %d)", i, pl->device, d->flags);
  }
  if (!r)
    for (size_t i = 0; i < count; i++) pl->access[map[i].location.id] = (unsigned char)map[i].flags;
out:
  unlock();
  return r;
}

/* ================================================================ kernels
 * The kernels of libmtc's cuda/ directory, known by name, run on the host by
 * cuLaunchKernel. Their parameters (kernelParams[i] points at parameter i),
 * as the .cu files declare them:
 *
 *   mtc_copy_segments(const mtc_segment *table, uint32_t n)
 *       mtc_segment is {uint64_t src, dst, bytes} (24 bytes): copies each
 *       segment's bytes from src to dst.
 *   mtc_debug_fill(uint8_t *dst, uint64_t bytes, uint32_t value, uint32_t spin_us)
 *       spins spin_us microseconds, then sets bytes bytes at dst to value.
 *   mtc_debug_copy(uint8_t *dst, const uint8_t *src, uint64_t bytes)
 *   mtc_scatter_segments(const uint8_t *block, uint64_t table_offset, uint32_t n)
 *       n segments at block + table_offset, each copying bytes from
 *       block + src to dst.
 *
 * Every range a kernel touches (bytes > 0) must lie in one live device
 * allocation of the launching device, of a peer it was given access to
 * (cuCtxEnablePeerAccess, or cuMemPoolSetAccess for pool memory), or in one
 * pinned host block; source and destination of one copy must not overlap.
 * A failed check fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS (the real
 * driver would report it later, from a synchronize) and nothing is written.
 * A launch costs its stream FAKE_CUDA_COPY_DELAY_US like a copy, plus the
 * fill's spin. */

enum { KERNEL_COPY_SEGMENTS = 1, KERNEL_DEBUG_FILL = 2, KERNEL_DEBUG_COPY = 3, KERNEL_SCATTER_SEGMENTS = 4 };

/* Kernels of PTX modules (the caller's own, through mtc_module_load). Each
 * launch is recorded: grid, block, shared bytes, stream and the bytes of
 * each parameter as the .entry declares its size (fake_cuda_last_launch).
 * One is also run on the host:
 *
 *   add_one_f32(float *p, uint32_t n)
 *       adds 1 to p[i] for each i < n that the grid covers
 *       (i < gridDim.x * blockDim.x), as a one-thread-per-element kernel.
 *   scale_add_f32(const float *x, float *y, float a, float b, uint32_t n)
 *       y[i] = a * x[i] + b, likewise.
 *
 * Any other .entry name only records. */
enum { KERNEL_PTX_RECORD = 10, KERNEL_PTX_ADD_ONE_F32 = 11, KERNEL_PTX_SCALE_ADD_F32 = 12 };

/* The last PTX launch (lock held to touch). */
static struct {
  int valid;
  unsigned int dims[8]; /* grid x y z, block x y z, shared bytes, parameters */
  uintptr_t stream;
  unsigned int bytes;
  unsigned char params[4096];
} g_last_launch;

/* What cuModuleLoadData accepts: 1 fatbin / cubin / the test stand-in, 2 PTX
 * text, 0 anything else (CUDA_ERROR_INVALID_IMAGE). */
static int image_kind(const void *image) {
  /* Byte by byte, so that a short image is never read past its NUL. */
  const unsigned char *b = image;
  if (b[0] == 0x50 && b[1] == 0xED && b[2] == 0x55 && b[3] == 0xBA) return 1; /* fatbin */
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') return 1;    /* cubin */
  if (strncmp(image, "libmtc test stub", 16) == 0) return 1;
  const char *text = image;
  if (strstr(text, ".version") && strstr(text, ".target")) return 2;
  return 0;
}

/* Bytes of a PTX parameter type (.u32, .f64, .b8, ...), 0 when unknown. */
static uint32_t ptx_type_bytes(const char *t, size_t n) {
  if (n < 3 || t[0] != '.') return 0;
  const char *bits = t + 2;
  if (t[1] == 'b' && t[2] == 'f') bits = t + 3; /* .bf16 */
  else if (t[1] != 'u' && t[1] != 's' && t[1] != 'b' && t[1] != 'f') return 0;
  size_t digits = n - (size_t)(bits - t);
  if (digits == 1 && bits[0] == '8') return 1;
  if (digits == 2 && memcmp(bits, "16", 2) == 0) return 2;
  if (digits == 2 && memcmp(bits, "32", 2) == 0) return 4;
  if (digits == 2 && memcmp(bits, "64", 2) == 0) return 8;
  return 0;
}

/* Finds `.entry name(` in PTX text and reads its parameters' sizes into f.
 * CUDA_ERROR_NOT_FOUND when there is no such entry, INVALID_IMAGE for a
 * parameter list the emulation cannot read. */
static CUresult ptx_find_entry(const char *fn, const char *text, const char *name, struct fake_function *f) {
  size_t len = strlen(name);
  const char *p = text;
  while ((p = strstr(p, ".entry")) != NULL) {
    p += 6;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (strncmp(p, name, len) != 0) continue;
    const char *q = p + len;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    if (*q != '(') continue;
    const char *end = strchr(q, ')');
    if (!end) return report(CUDA_ERROR_INVALID_IMAGE, fn, "kernel \"%s\": no ')' after its parameters", name);
    f->param_count = 0;
    for (const char *r = q; (r = strstr(r, ".param")) != NULL && r < end;) {
      r += 6;
      uint32_t size = 0, count = 1;
      /* Tokens up to the name: .align N, the type, state space qualifiers. */
      for (;;) {
        while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r') r++;
        if (*r != '.') break;
        size_t n = strcspn(r, " \t\r\n,)[");
        if (n == 6 && strncmp(r, ".align", 6) == 0) {
          r += n;
          while (*r == ' ') r++;
          r += strspn(r, "0123456789");
          continue;
        }
        if (!size) size = ptx_type_bytes(r, n);
        r += n;
      }
      r += strcspn(r, ",)[");
      if (*r == '[') count = (uint32_t)strtoul(r + 1, NULL, 10);
      if (!size || !count || f->param_count >= FAKE_MAX_PARAMS)
        return report(CUDA_ERROR_INVALID_IMAGE, fn, "kernel \"%s\": parameter %d has a type the emulation cannot read",
                      name, f->param_count);
      f->param_sizes[f->param_count++] = size * count;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    f->kernel = strcmp(name, "add_one_f32") == 0     ? KERNEL_PTX_ADD_ONE_F32
                : strcmp(name, "scale_add_f32") == 0 ? KERNEL_PTX_SCALE_ADD_F32
                                                     : KERNEL_PTX_RECORD;
    return CUDA_SUCCESS;
  }
  return report(CUDA_ERROR_NOT_FOUND, fn, "no kernel named \"%s\" in the PTX module", name);
}

/* Lock held. Records a PTX kernel's launch (see g_last_launch). */
static CUresult record_ptx_launch(const char *fn, const struct fake_function *f, const unsigned int dims[7],
                                  uintptr_t stream, void **params) {
  unsigned int bytes = 0;
  for (int i = 0; i < f->param_count; i++) {
    if (!params[i]) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams[%d] is NULL", i);
    bytes += f->param_sizes[i];
  }
  if (bytes > sizeof g_last_launch.params)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "%u bytes of parameters (the emulation records at most %zu)", bytes,
                  sizeof g_last_launch.params);
  unsigned int at = 0;
  for (int i = 0; i < f->param_count; i++) {
    memcpy(g_last_launch.params + at, params[i], f->param_sizes[i]);
    at += f->param_sizes[i];
  }
  memcpy(g_last_launch.dims, dims, 7 * sizeof dims[0]);
  g_last_launch.dims[7] = (unsigned int)f->param_count;
  g_last_launch.stream = stream;
  g_last_launch.bytes = bytes;
  g_last_launch.valid = 1;
  return CUDA_SUCCESS;
}

static const struct {
  int id;
  const char *name;
} k_kernels[] = {
    {KERNEL_COPY_SEGMENTS, "mtc_copy_segments"},
    {KERNEL_DEBUG_FILL, "mtc_debug_fill"},
    {KERNEL_DEBUG_COPY, "mtc_debug_copy"},
    {KERNEL_SCATTER_SEGMENTS, "mtc_scatter_segments"},
};

struct fake_segment {
  uint64_t src, dst, bytes;
};

_Static_assert(sizeof(struct fake_segment) == 24, "mtc_segment is 24 bytes");

/* Lock held. Drops functions whose module is gone. */
static void drop_orphan_functions(void) {
  for (uint32_t i = 0; i < g_slot_count; i++)
    if (g_slots[i].kind == KIND_FUNCTION &&
        !handle_get(KIND_MODULE, (void *)((struct fake_function *)g_slots[i].obj)->module, NULL))
      handle_drop(i);
}

/* The emulated GPUs compile PTX for sm_90 (an H100): a newer .target fails
 * the JIT with CUDA_ERROR_INVALID_PTX, and this line in its error log. */
#define FAKE_SM 90

/* 0, or the sm_ number of a PTX text's .target newer than FAKE_SM. */
static int ptx_target_too_new(const char *text) {
  const char *t = strstr(text, ".target");
  if (!t) return 0;
  t += 7;
  while (*t == ' ' || *t == '\t') t++;
  if (strncmp(t, "sm_", 3) != 0) return 0;
  int sm = atoi(t + 3);
  return sm > FAKE_SM ? sm : 0;
}

/* What the emulated JIT checks of a PTX text (with ptx_target_too_new):
 * the structure a real driver's JIT would also refuse without, not the
 * instructions. Past comments and white space. */
static const char *ptx_skip(const char *p) {
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (p[0] == '/' && p[1] == '/') {
      p += strcspn(p, "\n");
    } else if (p[0] == '/' && p[1] == '*') {
      const char *end = strstr(p + 2, "*/");
      p = end ? end + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* NULL for a PTX text whose structure the emulation accepts: .version N.M
 * first, .target next, at least one .entry, braces that balance. Else why
 * not, as the JIT's log would say. A body the real JIT would refuse for its
 * instructions (a typo, an undeclared register) still loads here. */
static const char *ptx_problem(const char *text) {
  const char *p = ptx_skip(text);
  if (strncmp(p, ".version", 8) != 0) return "a PTX module must begin with a .version directive";
  p += 8;
  while (*p == ' ' || *p == '\t') p++;
  size_t major = strspn(p, "0123456789");
  if (major == 0 || p[major] != '.' || p[major + 1] < '0' || p[major + 1] > '9')
    return ".version needs a version number (major.minor)";
  p = ptx_skip(p + strcspn(p, "\n"));
  if (strncmp(p, ".target", 7) != 0) return "the .version directive must be followed by a .target directive";
  if (!strstr(p, ".entry")) return "no .entry directive: the module has no kernel";
  long depth = 0;
  for (const char *c = p; *c; c++) {
    if (*c == '{') depth++;
    if (*c == '}' && --depth < 0) return "a '}' closes no '{'";
  }
  return depth ? "a '{' is never closed" : NULL;
}

/* cuModuleLoadData and cuModuleLoadDataEx; a JIT failure's message goes to
 * log (log_size bytes, NUL-terminated) when log is not NULL. */
static CUresult module_load(const char *fn, CUmodule *module, const void *image, char *log, size_t log_size) {
  CUresult r = need_init(fn);
  if (r) return r;
  if (!module || !image) return report(CUDA_ERROR_INVALID_VALUE, fn, "module or image is NULL");
  struct fake_ctx *c;
  lock();
  if ((r = need_ctx(fn, &c))) goto out;
  if (g_module_load_error) {
    r = report(g_module_load_error, fn, "failing as fake_cuda_fail_module_loads(%d) asked", g_module_load_error);
    goto out;
  }
  int kind = image_kind(image);
  if (!kind) {
    r = report(CUDA_ERROR_INVALID_IMAGE, fn, "the image is no fatbin, cubin (ELF) or PTX text");
    goto out;
  }
  int sm = kind == 2 ? ptx_target_too_new(image) : 0;
  if (sm) {
    if (log && log_size)
      snprintf(log, log_size, "ptxas application ptx input: fatal: .target sm_%d is newer than this GPU (sm_%d)", sm,
               FAKE_SM);
    r = report(CUDA_ERROR_INVALID_PTX, fn, "PTX for sm_%d, the emulated GPU is sm_%d", sm, FAKE_SM);
    goto out;
  }
  const char *problem = kind == 2 ? ptx_problem(image) : NULL;
  if (problem) {
    if (log && log_size) snprintf(log, log_size, "ptxas application ptx input: fatal: %s", problem);
    r = report(CUDA_ERROR_INVALID_PTX, fn, "%s", problem);
    goto out;
  }
  size_t text_bytes = kind == 2 ? strlen(image) + 1 : 1;
  struct fake_module *m = calloc(1, sizeof *m + text_bytes);
  if (m && kind == 2) {
    memcpy(m->text, image, text_bytes);
    m->ptx = 1;
  }
  uintptr_t h = m ? handle_new(KIND_MODULE, m) : 0;
  if (!h) {
    free(m);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another module");
    goto out;
  }
  m->device = c->device;
  m->epoch = c->epoch;
  *module = (CUmodule)h;
out:
  unlock();
  return r;
}

FAKE_MODULE_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return module_load(__func__, module, image, NULL, 0);
}

/* Reads CU_JIT_ERROR_LOG_BUFFER and its size (written back as the bytes
 * used, as the real driver does); other options are accepted and ignored. */
FAKE_MODULE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                            CUjit_option *options, void **optionValues) {
  if (numOptions && (!options || !optionValues))
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "%u options but options or optionValues is NULL", numOptions);
  char *log = NULL;
  size_t log_size = 0;
  int size_at = -1;
  for (unsigned i = 0; i < numOptions; i++) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) log = optionValues[i];
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      log_size = (size_t)(uintptr_t)optionValues[i];
      size_at = (int)i;
    }
  }
  if (log && log_size) log[0] = '\0';
  CUresult r = module_load(__func__, module, image, log, log_size);
  if (size_at >= 0 && log && log_size) optionValues[size_at] = (void *)(uintptr_t)strlen(log);
  return r;
}

FAKE_MODULE_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!hfunc || !name) return report(CUDA_ERROR_INVALID_VALUE, __func__, "hfunc or name is NULL");
  lock();
  struct fake_module *mod = handle_get(KIND_MODULE, hmod, NULL);
  if (!mod) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "module %p is not a live module (unloaded or never loaded)",
               (void *)hmod);
    goto out;
  }
  struct fake_function found = {0};
  if (mod->ptx) {
    if ((r = ptx_find_entry(__func__, mod->text, name, &found))) goto out;
  } else {
    for (size_t i = 0; i < sizeof k_kernels / sizeof k_kernels[0]; i++)
      if (strcmp(k_kernels[i].name, name) == 0) found.kernel = k_kernels[i].id;
  }
  if (!found.kernel) {
    r = report(CUDA_ERROR_NOT_FOUND, __func__, "no kernel named \"%s\"", name);
    goto out;
  }
  struct fake_function *f = calloc(1, sizeof *f);
  if (f) *f = found;
  uintptr_t h = f ? handle_new(KIND_FUNCTION, f) : 0;
  if (!h) {
    free(f);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another function");
    goto out;
  }
  f->module = (uintptr_t)hmod;
  *hfunc = (CUfunction)h;
out:
  unlock();
  return r;
}

FAKE_MODULE_API CUresult cuModuleUnload(CUmodule hmod) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_MODULE, hmod, &slot)) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "module %p is not a live module (unloaded or never loaded)",
               (void *)hmod);
  } else {
    handle_drop(slot);
    drop_orphan_functions();
  }
  unlock();
  return r;
}

/* Lock held. [p, p + n), n > 0, as a kernel on device sees it (see above). */
static CUresult check_kernel_range(const char *fn, const char *what, uint64_t p, uint64_t n, int device,
                                   int write) {
  struct fake_alloc *a = alloc_containing(&g_dev_allocs, (uintptr_t)p);
  if (a) {
    uint64_t room = a->size - (p - a->addr);
    if (n > room)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " (%" PRIu64 " bytes) runs %" PRIu64
                    " bytes past the end of device %d allocation 0x%" PRIxPTR " (%zu bytes)",
                    what, p, n, n - room, a->device, a->addr, a->size);
    if (a->epoch != g_ctx[a->device].epoch)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " was allocated before device %d's primary context was last released", what, p,
                    a->device);
    if (a->device != device) {
      struct fake_pool *pool = a->pool ? handle_get(KIND_POOL, (void *)a->pool, NULL) : NULL;
      int access = pool ? pool->access[device] : ((g_ctx[device].peer_mask >> a->device) & 1) ? 3 : 0;
      int need = write ? 3 : 1;
      if ((access & need) != need)
        return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                      "%s 0x%" PRIx64 " (%" PRIu64 " bytes) is memory of device %d, which a kernel on device %d "
                      "may not %s (%s)",
                      what, p, n, a->device, device, write ? "write" : "read",
                      pool ? "cuMemPoolSetAccess" : "cuCtxEnablePeerAccess");
    }
    return CUDA_SUCCESS;
  }
  struct fake_alloc *h = alloc_containing(&g_host_allocs, (uintptr_t)p);
  if (h) {
    uint64_t room = h->size - (p - h->addr);
    if (n > room)
      return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                    "%s 0x%" PRIx64 " (%" PRIu64 " bytes) runs %" PRIu64
                    " bytes past the end of pinned block 0x%" PRIxPTR " (%zu bytes)",
                    what, p, n, n - room, h->addr, h->size);
    return CUDA_SUCCESS;
  }
  return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                "%s 0x%" PRIx64 " (%" PRIu64 " bytes) is neither device memory nor pinned host memory (a kernel "
                "cannot reach pageable or freed memory)",
                what, p, n);
}

/* Lock held. One copy of a kernel: both ranges reachable, no overlap. */
static CUresult check_kernel_copy(const char *fn, const char *what, uint64_t dst, uint64_t src, uint64_t n,
                                  int device) {
  char name[64];
  CUresult r;
  snprintf(name, sizeof name, "%s source", what);
  if ((r = check_kernel_range(fn, name, src, n, device, 0))) return r;
  snprintf(name, sizeof name, "%s destination", what);
  if ((r = check_kernel_range(fn, name, dst, n, device, 1))) return r;
  if (src < dst + n && dst < src + n)
    return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                  "%s: source 0x%" PRIx64 " and destination 0x%" PRIx64 " (%" PRIu64 " bytes) overlap", what, src, dst,
                  n);
  return CUDA_SUCCESS;
}

/* Reads kernel parameter i (size bytes) into out. */
static CUresult kernel_param(const char *fn, void **params, int i, void *out, size_t size) {
  if (!params[i]) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams[%d] is NULL", i);
  memcpy(out, params[i], size);
  return CUDA_SUCCESS;
}

FAKE_MODULE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
  const char *fn = __func__;
  CUresult r = need_init(fn);
  if (r) return r;
  if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "a zero dimension: grid %ux%ux%u, block %ux%ux%u", gridDimX,
                  gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);
  if (gridDimX > 0x7fffffffu || gridDimY > 65535 || gridDimZ > 65535)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "grid %ux%ux%u is too large", gridDimX, gridDimY, gridDimZ);
  if (blockDimX > 1024 || blockDimY > 1024 || blockDimZ > 64 ||
      (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "block %ux%ux%u is too large (at most 1024 threads)", blockDimX,
                  blockDimY, blockDimZ);
  if (sharedMemBytes > 48 * 1024)
    return report(CUDA_ERROR_INVALID_VALUE, fn, "sharedMemBytes %u > 48 KiB", sharedMemBytes);
  if (extra) return report(CUDA_ERROR_INVALID_VALUE, fn, "extra is not NULL (the emulation takes kernelParams only)");
  if (!kernelParams) return report(CUDA_ERROR_INVALID_VALUE, fn, "kernelParams is NULL");

  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  struct fake_function *func;
  struct fake_module *m = NULL;
  int kernel = 0;
  uint64_t spin_ns = 0;
  /* What runs after the checks. */
  uint64_t table = 0, dst = 0, src = 0, bytes = 0;
  uint32_t n = 0, value = 0;
  float scale = 0, offset = 0;
  lock();
  if ((r = need_ctx(fn, &c))) goto out;
  if (!(func = handle_get(KIND_FUNCTION, f, NULL))) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "function %p is not a live function", (void *)f);
    goto out;
  }
  if (!(m = handle_get(KIND_MODULE, (void *)func->module, NULL))) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "the function's module was unloaded");
    goto out;
  }
  if (m->device != c->device || m->epoch != c->epoch) {
    r = report(CUDA_ERROR_INVALID_HANDLE, fn,
               "the function's module was loaded in device %d's context, current context is device %d%s", m->device,
               c->device, m->device == c->device ? " (since released)" : "");
    goto out;
  }
  if ((r = get_stream(fn, hStream, c, 1, &s))) goto out;
  kernel = func->kernel;
  switch (kernel) {
  case KERNEL_COPY_SEGMENTS:
    if ((r = kernel_param(fn, kernelParams, 0, &table, 8)) || (r = kernel_param(fn, kernelParams, 1, &n, 4))) break;
    if (n == 0) break;
    if ((r = check_kernel_range(fn, "segment table", table, (uint64_t)n * sizeof(struct fake_segment), c->device,
                                0)))
      break;
    for (uint32_t i = 0; i < n && !r; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes == 0) continue;
      char what[32];
      snprintf(what, sizeof what, "segment %u", i);
      r = check_kernel_copy(fn, what, seg.dst, seg.src, seg.bytes, c->device);
    }
    break;
  case KERNEL_SCATTER_SEGMENTS: {
    uint64_t offset = 0;
    if ((r = kernel_param(fn, kernelParams, 0, &src, 8)) || (r = kernel_param(fn, kernelParams, 1, &offset, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &n, 4)))
      break;
    if (n == 0) break;
    if (offset % 8)
      r = report(CUDA_ERROR_ILLEGAL_ADDRESS, fn, "table_offset %" PRIu64 " is not a multiple of 8", offset);
    if (!r) r = check_kernel_range(fn, "scatter table", src + offset, (uint64_t)n * sizeof(struct fake_segment),
                                   c->device, 0);
    table = src + offset;
    for (uint32_t i = 0; i < n && !r; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes == 0) continue;
      char what[32];
      snprintf(what, sizeof what, "segment %u", i);
      r = check_kernel_copy(fn, what, seg.dst, src + seg.src, seg.bytes, c->device);
    }
    break;
  }
  case KERNEL_DEBUG_FILL: {
    uint32_t spin_us = 0;
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &bytes, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &value, 4)) || (r = kernel_param(fn, kernelParams, 3, &spin_us, 4)))
      break;
    spin_ns = (uint64_t)spin_us * 1000u;
    if (bytes) r = check_kernel_range(fn, "fill destination", dst, bytes, c->device, 1);
    break;
  }
  case KERNEL_DEBUG_COPY:
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &src, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &bytes, 8)))
      break;
    if (bytes) r = check_kernel_copy(fn, "copy", dst, src, bytes, c->device);
    break;
  case KERNEL_PTX_ADD_ONE_F32:
    if ((r = kernel_param(fn, kernelParams, 0, &dst, 8)) || (r = kernel_param(fn, kernelParams, 1, &n, 4))) break;
    /* One thread per element: the grid covers so many. */
    if ((uint64_t)gridDimX * blockDimX < n) n = (uint32_t)((uint64_t)gridDimX * blockDimX);
    if (n) r = check_kernel_range(fn, "add_one_f32 p", dst, (uint64_t)n * 4u, c->device, 1);
    break;
  case KERNEL_PTX_SCALE_ADD_F32:
    if ((r = kernel_param(fn, kernelParams, 0, &src, 8)) || (r = kernel_param(fn, kernelParams, 1, &dst, 8)) ||
        (r = kernel_param(fn, kernelParams, 2, &scale, 4)) || (r = kernel_param(fn, kernelParams, 3, &offset, 4)) ||
        (r = kernel_param(fn, kernelParams, 4, &n, 4)))
      break;
    if ((uint64_t)gridDimX * blockDimX < n) n = (uint32_t)((uint64_t)gridDimX * blockDimX);
    if (n && !(r = check_kernel_range(fn, "scale_add_f32 x", src, (uint64_t)n * 4u, c->device, 0)))
      r = check_kernel_range(fn, "scale_add_f32 y", dst, (uint64_t)n * 4u, c->device, 1);
    break;
  case KERNEL_PTX_RECORD:
    break;
  default:
    r = report(CUDA_ERROR_INVALID_HANDLE, fn, "unknown kernel %d", kernel);
  }
  if (!r && kernel >= KERNEL_PTX_RECORD) {
    unsigned int dims[7] = {gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes};
    r = record_ptx_launch(fn, func, dims, (uintptr_t)hStream, kernelParams);
  }
  if (!r) {
    s->busy_until = max_u64(s->busy_until, now_ns()) + g_copy_delay_ns + spin_ns;
    g_launch_count++;
  }
out:
  unlock();
  if (r) return r;
  /* The work itself, after the lock like the copies' memcpy. */
  switch (kernel) {
  case KERNEL_COPY_SEGMENTS:
    for (uint32_t i = 0; i < n; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes) memcpy((void *)(uintptr_t)seg.dst, (const void *)(uintptr_t)seg.src, seg.bytes);
    }
    break;
  case KERNEL_SCATTER_SEGMENTS:
    for (uint32_t i = 0; i < n; i++) {
      struct fake_segment seg;
      memcpy(&seg, (const void *)(uintptr_t)(table + (uint64_t)i * sizeof seg), sizeof seg);
      if (seg.bytes) memcpy((void *)(uintptr_t)seg.dst, (const void *)(uintptr_t)(src + seg.src), seg.bytes);
    }
    break;
  case KERNEL_DEBUG_FILL:
    if (bytes) memset((void *)(uintptr_t)dst, (int)(value & 0xffu), bytes);
    break;
  case KERNEL_DEBUG_COPY:
    if (bytes) memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    break;
  case KERNEL_PTX_ADD_ONE_F32:
    for (uint32_t i = 0; i < n; i++) {
      float v;
      memcpy(&v, (const char *)(uintptr_t)dst + 4u * i, 4);
      v += 1.0f;
      memcpy((char *)(uintptr_t)dst + 4u * i, &v, 4);
    }
    break;
  case KERNEL_PTX_SCALE_ADD_F32:
    for (uint32_t i = 0; i < n; i++) {
      float x, y;
      memcpy(&x, (const char *)(uintptr_t)src + 4u * i, 4);
      y = (float)((double)x * scale + offset); /* the product is exact in double, as in an fma */
      memcpy((char *)(uintptr_t)dst + 4u * i, &y, 4);
    }
    break;
  default:
    break;
  }
  return CUDA_SUCCESS;
}

/* Fills at once, with the checks and time model of a copy. */
FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  CUresult r = need_init(__func__);
  if (r) return r;
  struct fake_ctx *c;
  struct fake_stream *s = NULL;
  lock();
  if (!(r = need_ctx(__func__, &c)) && !(r = get_stream(__func__, hStream, c, 1, &s)) && N)
    r = check_device_range(__func__, "destination", dstDevice, N, c->device);
  if (!r) stream_enqueue_copy(s, 0);
  unlock();
  if (r) return r;
  if (N) memset((void *)(uintptr_t)dstDevice, uc, N);
  return CUDA_SUCCESS;
}

/* ======================================================= test-only exports */

FAKE_API int fake_cuda_live_device_allocations(void) {
  lock();
  int n = (int)g_dev_allocs.n;
  unlock();
  return n;
}

FAKE_API int fake_cuda_live_host_allocations(void) {
  lock();
  int n = (int)g_host_allocs.n;
  unlock();
  return n;
}

FAKE_API int fake_cuda_live_streams(void) {
  lock();
  int n = g_live[KIND_STREAM];
  unlock();
  return n;
}

FAKE_API int fake_cuda_live_events(void) {
  lock();
  int n = g_live[KIND_EVENT];
  unlock();
  return n;
}

/* Successful cuMemcpy* calls, zero-byte ones included. */
FAKE_API unsigned long long fake_cuda_copy_count(void) {
  lock();
  unsigned long long n = g_copy_count;
  unlock();
  return n;
}

/* Host-to-device and device-to-host copies whose host side was pageable. */
FAKE_API unsigned long long fake_cuda_pageable_copy_count(void) {
  lock();
  unsigned long long n = g_pageable_copy_count;
  unlock();
  return n;
}

/* Successful cuLaunchKernel calls. */
FAKE_API unsigned long long fake_cuda_kernel_launches(void) {
  lock();
  unsigned long long n = g_launch_count;
  unlock();
  return n;
}

FAKE_API int fake_cuda_live_modules(void) {
  lock();
  int n = g_live[KIND_MODULE];
  unlock();
  return n;
}

/* Nonzero: cuModuleLoadData fails with this CUresult from now on (e.g. 209,
 * CUDA_ERROR_NO_BINARY_FOR_GPU); 0: loads succeed again. */
FAKE_API void fake_cuda_fail_module_loads(int result) {
  lock();
  g_module_load_error = result;
  unlock();
}

/* The last launch of a PTX module's kernel: writes grid x y z, block x y z,
 * shared bytes and the parameter count to dims[0..7], and the parameters'
 * bytes, each as its .entry declares its size, one after the other, to
 * params (at most capacity bytes). Returns how many bytes the parameters
 * take, or -1 when no PTX kernel was launched yet. */
FAKE_API int fake_cuda_last_launch(unsigned int *dims, unsigned char *params, unsigned int capacity) {
  lock();
  int bytes = g_last_launch.valid ? (int)g_last_launch.bytes : -1;
  if (bytes >= 0) {
    if (dims) memcpy(dims, g_last_launch.dims, sizeof g_last_launch.dims);
    if (params) memcpy(params, g_last_launch.params, (unsigned)bytes < capacity ? (unsigned)bytes : capacity);
  }
  unlock();
  return bytes;
}

/* The CUstream of the last launch of a PTX module's kernel (0: none). */
FAKE_API unsigned long long fake_cuda_last_launch_stream(void) {
  lock();
  unsigned long long stream = g_last_launch.valid ? g_last_launch.stream : 0;
  unlock();
  return stream;
}

FAKE_API void fake_cuda_reset_counters(void) {
  lock();
  g_copy_count = 0;
  g_pageable_copy_count = 0;
  g_launch_count = 0;
  unlock();
}

/* Overrides FAKE_CUDA_COPY_DELAY_US for copies queued from now on, also
 * when called before cuInit. */
FAKE_API void fake_cuda_set_copy_delay_us(unsigned long long us) {
  lock();
  g_copy_delay_ns = (uint64_t)us * 1000u;
  g_copy_delay_set = 1;
  unlock();
}
