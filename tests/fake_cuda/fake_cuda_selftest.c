/*
 * fake_cuda_selftest.c: checks libfakecuda.so by dlopen, as libmtc uses it.
 *
 *   zig cc -std=c11 -Wall -Wextra -shared -fPIC -o libfakecuda.so fake_cuda.c -lpthread
 *   zig cc -std=c11 -Wall -Wextra -o fake_cuda_selftest fake_cuda_selftest.c -ldl -lpthread
 *   ./fake_cuda_selftest ./libfakecuda.so
 *
 * Failed CUDA calls print "fake_cuda: ..." lines on stderr by design; the
 * test itself prints "ok <section>" lines and exits 0 when every check held.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef enum CUjit_option_enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 } CUjit_option;
/* Struct tags as cuda.h (and fake_cuda.c) name them: calls through these
 * pointer types must match the definitions (-fsanitize=function). */
typedef struct CUmemLocation_st {
  int type, id;
} CUmemLocation;
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags;
} CUmemAccessDesc;
typedef struct CUmemPoolProps_st {
  int allocType, handleTypes;
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

enum {
  OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
  INVALID_DEVICE = 101, INVALID_CONTEXT = 201, INVALID_IMAGE = 200, NO_BINARY_FOR_GPU = 209, INVALID_PTX = 218, INVALID_HANDLE = 400,
  NOT_FOUND = 500, NOT_READY = 600, ILLEGAL_ADDRESS = 700, PEER_ACCESS_ALREADY_ENABLED = 704,
  PEER_ACCESS_UNSUPPORTED = 217
};

/* The driver table, filled by dlsym. */
#define API(X)                                                                                   \
  X(CUresult, cuInit, (unsigned))                                                                \
  X(CUresult, cuDriverGetVersion, (int *))                                                       \
  X(CUresult, cuGetErrorName, (CUresult, const char **))                                         \
  X(CUresult, cuGetErrorString, (CUresult, const char **))                                       \
  X(CUresult, cuDeviceGetCount, (int *))                                                         \
  X(CUresult, cuDeviceGet, (CUdevice *, int))                                                    \
  X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                 \
  X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice))                                          \
  X(CUresult, cuCtxGetCurrent, (CUcontext *))                                                    \
  X(CUresult, cuCtxSetCurrent, (CUcontext))                                                      \
  X(CUresult, cuCtxPushCurrent_v2, (CUcontext))                                                  \
  X(CUresult, cuCtxPopCurrent_v2, (CUcontext *))                                                 \
  X(CUresult, cuCtxGetDevice, (CUdevice *))                                                      \
  X(CUresult, cuStreamCreate, (CUstream *, unsigned))                                            \
  X(CUresult, cuStreamDestroy_v2, (CUstream))                                                    \
  X(CUresult, cuStreamSynchronize, (CUstream))                                                   \
  X(CUresult, cuStreamWaitEvent, (CUstream, CUevent, unsigned))                                  \
  X(CUresult, cuEventCreate, (CUevent *, unsigned))                                              \
  X(CUresult, cuEventDestroy_v2, (CUevent))                                                      \
  X(CUresult, cuEventRecord, (CUevent, CUstream))                                                \
  X(CUresult, cuEventQuery, (CUevent))                                                           \
  X(CUresult, cuEventSynchronize, (CUevent))                                                     \
  X(CUresult, cuEventElapsedTime, (float *, CUevent, CUevent))                                   \
  X(CUresult, cuDeviceGetName, (char *, int, CUdevice))                                          \
  X(CUresult, cuDeviceTotalMem_v2, (size_t *, CUdevice))                                         \
  X(CUresult, cuMemHostAlloc, (void **, size_t, unsigned))                                       \
  X(CUresult, cuMemFreeHost, (void *))                                                           \
  X(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))                                            \
  X(CUresult, cuMemFree_v2, (CUdeviceptr))                                                       \
  X(CUresult, cuMemPoolCreate, (CUmemoryPool *, const CUmemPoolProps *))                         \
  X(CUresult, cuMemPoolDestroy, (CUmemoryPool))                                                  \
  X(CUresult, cuMemPoolSetAttribute, (CUmemoryPool, int, void *))                                \
  X(CUresult, cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))          \
  X(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream))                                           \
  X(CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream))               \
  X(CUresult, cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream))                     \
  X(CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                \
  X(CUresult, cuMemcpyPeerAsync, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)) \
  X(CUresult, cuDeviceCanAccessPeer, (int *, CUdevice, CUdevice))                                \
  X(CUresult, cuCtxEnablePeerAccess, (CUcontext, unsigned))                                      \
  X(CUresult, cuMemPoolSetAccess, (CUmemoryPool, const CUmemAccessDesc *, size_t))               \
  X(CUresult, cuModuleLoadData, (CUmodule *, const void *))                                      \
  X(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                       \
  X(CUresult, cuModuleUnload, (CUmodule))                                                        \
  X(CUresult, cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,     \
                               unsigned, unsigned, CUstream, void **, void **))                  \
  X(int, fake_cuda_live_device_allocations, (void))                                              \
  X(int, fake_cuda_live_host_allocations, (void))                                                \
  X(int, fake_cuda_live_streams, (void))                                                         \
  X(int, fake_cuda_live_events, (void))                                                          \
  X(unsigned long long, fake_cuda_copy_count, (void))                                            \
  X(unsigned long long, fake_cuda_pageable_copy_count, (void))                                   \
  X(void, fake_cuda_reset_counters, (void))                                                      \
  X(void, fake_cuda_set_copy_delay_us, (unsigned long long))                                     \
  X(unsigned long long, fake_cuda_kernel_launches, (void))                                       \
  X(int, fake_cuda_live_modules, (void))                                                         \
  X(void, fake_cuda_fail_module_loads, (int))                                                    \
  X(CUresult, cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, CUstream))                   \
  X(CUresult, cuModuleLoadDataEx, (CUmodule *, const void *, unsigned, CUjit_option *, void **))  \
  X(int, fake_cuda_last_launch, (unsigned *, unsigned char *, unsigned))                         \
  X(unsigned long long, fake_cuda_last_launch_stream, (void))                                   \
  X(void, fake_cuda_check_races, (int))                                                          \
  X(unsigned long long, fake_cuda_race_count, (void))                                            \
  X(void, fake_cuda_set_sync_linger_us, (unsigned long long))                                    \
  X(int, fake_cuda_synchronizes_in_progress, (void))

#define DECLARE(ret, name, args) static ret(*name) args;
API(DECLARE)

static int failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
      failures++;                                                            \
    }                                                                        \
  } while (0)

/* A CUDA call must return exactly `want`. */
#define EXPECT(want, call)                                                              \
  do {                                                                                  \
    CUresult got_ = (call);                                                             \
    if (got_ != (want)) {                                                               \
      fprintf(stderr, "FAIL %s:%d: %s returned %d, want %d\n", __FILE__, __LINE__, #call, \
              got_, (want));                                                            \
      failures++;                                                                       \
    }                                                                                   \
  } while (0)

static void load(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
#define LOAD(ret, name, args)                                 \
  *(void **)&name = dlsym(lib, #name);                        \
  if (!name) {                                                \
    fprintf(stderr, "missing symbol %s\n", #name);            \
    exit(2);                                                  \
  }
  API(LOAD)
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void section(const char *name) {
  static int reported;
  printf("%s %s\n", failures > reported ? "FAILED" : "ok    ", name);
  reported = failures;
}

/* ------------------------------------------------------------ no device */

/* Runs in a child so the library reads FAKE_CUDA_DEVICE_COUNT=0 afresh. */
static int no_device(const char *path) {
  setenv("FAKE_CUDA_DEVICE_COUNT", "0", 1);
  load(path);
  int n = -1;
  EXPECT(NOT_INITIALIZED, cuDeviceGetCount(&n));
  EXPECT(NO_DEVICE, cuInit(0));
  EXPECT(OK, cuDeviceGetCount(&n));
  CHECK(n == 0);
  CUdevice d;
  EXPECT(NOT_INITIALIZED, cuDeviceGet(&d, 0));
  section("no device: cuInit gives NO_DEVICE, count 0");
  return failures != 0;
}

/* A copy delay set before cuInit is kept (FAKE_CUDA_COPY_DELAY_US is 0). */
static int delay_before_init(const char *path) {
  setenv("FAKE_CUDA_DEVICE_COUNT", "1", 1);
  setenv("FAKE_CUDA_COPY_DELAY_US", "0", 1);
  load(path);
  fake_cuda_set_copy_delay_us(20000);
  EXPECT(OK, cuInit(0));
  CUdevice d;
  CUcontext ctx;
  EXPECT(OK, cuDeviceGet(&d, 0));
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx, d));
  EXPECT(OK, cuCtxSetCurrent(ctx));
  CUdeviceptr dst;
  EXPECT(OK, cuMemAlloc_v2(&dst, 64));
  static unsigned char pageable[64];
  double t0 = now_ms();
  EXPECT(OK, cuMemcpyHtoDAsync_v2(dst, pageable, 64, NULL)); /* pageable: blocks */
  CHECK(now_ms() - t0 >= 15);
  EXPECT(OK, cuMemFree_v2(dst));
  section("a copy delay set before cuInit is kept");
  return failures != 0;
}

/* FAKE_CUDA_NO_PEER=1: no pair is a peer, access cannot be granted, and a
 * kernel on device 1 may not touch device 0's memory; peer copies work. */
static int no_peer(const char *path) {
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_NO_PEER", "1", 1);
  setenv("FAKE_CUDA_QUIET", "1", 1);
  load(path);
  EXPECT(OK, cuInit(0));
  int can = -1;
  EXPECT(OK, cuDeviceCanAccessPeer(&can, 0, 1));
  CHECK(can == 0);
  CUcontext ctx0, ctx1;
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx0, 0));
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx1, 1));
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  EXPECT(PEER_ACCESS_UNSUPPORTED, cuCtxEnablePeerAccess(ctx0, 0));
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = 1;
  props.location.type = 1;
  props.location.id = 0;
  CUmemoryPool pool0;
  EXPECT(OK, cuMemPoolCreate(&pool0, &props));
  CUmemAccessDesc acc[2] = {{{1, 0}, 3}, {{1, 1}, 3}};
  EXPECT(INVALID_DEVICE, cuMemPoolSetAccess(pool0, acc, 2)); /* device 1 to device 0's pool */
  acc[1].flags = 0;
  EXPECT(OK, cuMemPoolSetAccess(pool0, acc, 2)); /* no access asked: fine */
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  CUdeviceptr d0, d1;
  EXPECT(OK, cuMemAlloc_v2(&d0, 64));
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  EXPECT(OK, cuMemAlloc_v2(&d1, 64));
  EXPECT(OK, cuMemcpyPeerAsync(d0, ctx0, d1, ctx1, 64, NULL)); /* staged by the driver */
  EXPECT(OK, cuMemFree_v2(d1));
  EXPECT(OK, cuMemPoolDestroy(pool0));
  section("FAKE_CUDA_NO_PEER=1: no peers, no access granted, peer copies still work");
  return failures != 0;
}

/* Two streams on two devices touch one pinned block: with the race check
 * on, a copy that overlaps another stream's in modelled time, one of them
 * writing, fails; reads together, or a copy ordered by an event, pass.
 * Then cuEventSynchronize's linger. */
static int races(const char *path) {
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_QUIET", "1", 1);
  setenv("FAKE_CUDA_CHECK_RACES", "1", 1);
  load(path);
  EXPECT(OK, cuInit(0));
  CUcontext ctx0, ctx1;
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx0, 0));
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx1, 1));
  CUstream s0, s1;
  CUdeviceptr d0, d1;
  CUevent done;
  void *pinned = NULL;
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  EXPECT(OK, cuStreamCreate(&s1, 0));
  EXPECT(OK, cuMemAlloc_v2(&d1, 4096));
  EXPECT(OK, cuEventCreate(&done, 0));
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  EXPECT(OK, cuStreamCreate(&s0, 0));
  EXPECT(OK, cuMemAlloc_v2(&d0, 4096));
  EXPECT(OK, cuMemHostAlloc(&pinned, 4096, 0));
  char *p = pinned;

  /* cuda:1 writes the block's first half for a modelled 300 ms. */
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  fake_cuda_set_copy_delay_us(300000);
  EXPECT(OK, cuMemcpyDtoHAsync_v2(p, d1, 2048, s1));
  EXPECT(OK, cuEventRecord(done, s1));
  fake_cuda_set_copy_delay_us(0);
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  EXPECT(ILLEGAL_ADDRESS, cuMemcpyHtoDAsync_v2(d0, p + 1024, 16, s0));  /* reads what it writes */
  EXPECT(ILLEGAL_ADDRESS, cuMemcpyDtoHAsync_v2(p + 2047, d0, 2, s0));   /* one byte in common */
  CHECK(fake_cuda_race_count() == 2);
  EXPECT(OK, cuMemcpyDtoHAsync_v2(p + 2048, d0, 2048, s0));  /* the other half */
  EXPECT(OK, cuStreamWaitEvent(s0, done, 0));
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, p, 4096, s0));         /* after the write: ordered */
  CHECK(fake_cuda_race_count() == 2);
  EXPECT(OK, cuStreamSynchronize(s0));

  /* Two streams reading at once never race. */
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  fake_cuda_set_copy_delay_us(300000);
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d1, p, 4096, s1));
  fake_cuda_set_copy_delay_us(0);
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, p, 4096, s0));
  CHECK(fake_cuda_race_count() == 2);
  EXPECT(OK, cuStreamSynchronize(s1));
  section("FAKE_CUDA_CHECK_RACES=1: unordered copies touching pinned bytes, one writing, fail; reads and ordered copies pass");

  /* A synchronize stays in the driver for the linger once its event completed. */
  fake_cuda_set_sync_linger_us(50000);
  EXPECT(OK, cuCtxSetCurrent(ctx1));
  EXPECT(OK, cuEventRecord(done, s1));
  double t0 = now_ms();
  EXPECT(OK, cuEventSynchronize(done));
  CHECK(now_ms() - t0 >= 50);
  CHECK(fake_cuda_synchronizes_in_progress() == 0);
  fake_cuda_set_sync_linger_us(0);
  section("fake_cuda_set_sync_linger_us: a synchronize returns the linger after its event");
  return failures != 0;
}

/* -------------------------------------------------------------- threads */

struct worker {
  CUcontext ctx;
  CUevent foreign_event;
  int errors;
};

/* A thread without a current context, then a busy one with ctx. */
static void *worker_main(void *arg) {
  struct worker *w = arg;
  CUdeviceptr d;
  if (cuMemAlloc_v2(&d, 64) != INVALID_CONTEXT) w->errors++;
  if (cuEventQuery(w->foreign_event) != OK) w->errors++; /* no context needed */
  CUstream s;
  if (cuCtxSetCurrent(w->ctx) != OK || cuStreamCreate(&s, 1) != OK) {
    w->errors++;
    return NULL;
  }
  char buf[256], back[256];
  for (int i = 0; i < 2000; i++) {
    memset(buf, i & 0xff, sizeof buf);
    if (cuMemAlloc_v2(&d, sizeof buf) != OK) {
      w->errors++;
      break;
    }
    if (cuMemcpyHtoDAsync_v2(d, buf, sizeof buf, s) != OK || cuMemcpyDtoHAsync_v2(back, d, sizeof buf, s) != OK ||
        cuStreamSynchronize(s) != OK || memcmp(buf, back, sizeof buf) != 0)
      w->errors++;
    if (cuMemFree_v2(d) != OK) w->errors++;
  }
  if (cuStreamDestroy_v2(s) != OK) w->errors++;
  return NULL;
}

/* ----------------------------------------------------------------- main */

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "./libfakecuda.so";

  pid_t pid = fork();
  if (pid == 0) {
    int rc = no_device(path);
    fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
  pid = fork();
  if (pid == 0) {
    int rc = delay_before_init(path);
    fflush(stdout);
    _exit(rc);
  }
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
  pid = fork();
  if (pid == 0) {
    int rc = no_peer(path);
    fflush(stdout);
    _exit(rc);
  }
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
  pid = fork();
  if (pid == 0) {
    int rc = races(path);
    fflush(stdout);
    _exit(rc);
  }
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;

  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_DEVICE_MEMORY_BYTES", "1m", 1);
  setenv("FAKE_CUDA_COPY_DELAY_US", "0", 1);
  load(path);

  /* Before cuInit. */
  int v = 0, n = 0;
  const char *str = NULL;
  EXPECT(OK, cuDriverGetVersion(&v));
  CHECK(v == 13000);
  EXPECT(OK, cuGetErrorName(NOT_READY, &str));
  CHECK(str && strcmp(str, "CUDA_ERROR_NOT_READY") == 0);
  EXPECT(OK, cuGetErrorString(INVALID_HANDLE, &str));
  CHECK(str && strcmp(str, "invalid resource handle") == 0);
  EXPECT(INVALID_VALUE, cuGetErrorName(12345, &str));
  CHECK(str == NULL);
  EXPECT(NOT_INITIALIZED, cuDeviceGetCount(&n));
  CUstream s0 = NULL;
  EXPECT(NOT_INITIALIZED, cuStreamCreate(&s0, 0));
  EXPECT(NOT_INITIALIZED, cuEventQuery(NULL));
  EXPECT(INVALID_VALUE, cuInit(1));
  EXPECT(OK, cuInit(0));
  EXPECT(OK, cuInit(0));
  section("init: version, error names, NOT_INITIALIZED before cuInit");

  /* Devices. */
  CUdevice dev = -1;
  EXPECT(OK, cuDeviceGetCount(&n));
  CHECK(n == 2);
  EXPECT(OK, cuDeviceGet(&dev, 1));
  CHECK(dev == 1);
  EXPECT(INVALID_DEVICE, cuDeviceGet(&dev, 2));
  EXPECT(INVALID_DEVICE, cuDeviceGet(&dev, -1));
  section("devices: count from FAKE_CUDA_DEVICE_COUNT, bad ordinals");

  /* Contexts. */
  CUcontext ctx0, ctx1, again, got;
  EXPECT(INVALID_CONTEXT, cuCtxGetDevice(&dev));
  EXPECT(INVALID_CONTEXT, cuStreamCreate(&s0, 0));
  EXPECT(OK, cuCtxGetCurrent(&got));
  CHECK(got == NULL);
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx0, 0));
  EXPECT(OK, cuDevicePrimaryCtxRetain(&ctx1, 1));
  EXPECT(OK, cuDevicePrimaryCtxRetain(&again, 0));
  CHECK(ctx0 != ctx1 && again == ctx0);
  EXPECT(INVALID_DEVICE, cuDevicePrimaryCtxRetain(&again, 7));
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  EXPECT(OK, cuCtxGetDevice(&dev));
  CHECK(dev == 0);
  EXPECT(OK, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuCtxGetDevice(&dev));
  CHECK(dev == 1);
  EXPECT(OK, cuCtxSetCurrent(ctx0)); /* replaces the top */
  EXPECT(OK, cuCtxPopCurrent_v2(&got));
  CHECK(got == ctx0);
  EXPECT(OK, cuCtxGetCurrent(&got));
  CHECK(got == ctx0);
  EXPECT(OK, cuCtxPopCurrent_v2(NULL));
  EXPECT(INVALID_CONTEXT, cuCtxPopCurrent_v2(&got));
  EXPECT(OK, cuCtxSetCurrent(NULL)); /* empty stack: no-op */
  EXPECT(INVALID_CONTEXT, cuCtxSetCurrent((CUcontext)(uintptr_t)0x1234));
  EXPECT(INVALID_VALUE, cuCtxPushCurrent_v2(NULL));
  EXPECT(OK, cuDevicePrimaryCtxRelease_v2(0)); /* drop the second retain */
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  section("contexts: retain, set, push/pop stack, bad handles");

  /* Streams and events. */
  CUstream s1, s2;
  CUevent ev, ev1, fresh;
  EXPECT(OK, cuStreamCreate(&s0, 0));
  EXPECT(OK, cuStreamCreate(&s2, 1));
  EXPECT(INVALID_VALUE, cuStreamCreate(&s1, 2));
  EXPECT(OK, cuEventCreate(&ev, 2));
  EXPECT(OK, cuEventCreate(&fresh, 0));
  EXPECT(OK, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuStreamCreate(&s1, 0));
  EXPECT(OK, cuEventCreate(&ev1, 0));
  EXPECT(OK, cuCtxPopCurrent_v2(NULL));
  CHECK(fake_cuda_live_streams() == 3 && fake_cuda_live_events() == 3);
  EXPECT(INVALID_HANDLE, cuStreamDestroy_v2((CUstream)(uintptr_t)0xdeadbeef));
  EXPECT(INVALID_HANDLE, cuStreamDestroy_v2((CUstream)ev)); /* an event is not a stream */
  EXPECT(INVALID_HANDLE, cuStreamDestroy_v2(NULL));
  EXPECT(INVALID_HANDLE, cuEventRecord(ev1, s0)); /* event of device 1 */
  EXPECT(INVALID_HANDLE, cuEventRecord(ev, s1));  /* stream of device 1 */
  EXPECT(OK, cuEventQuery(fresh));                 /* never recorded: ready */
  CUstream tmp;
  EXPECT(OK, cuStreamCreate(&tmp, 0));
  EXPECT(OK, cuStreamDestroy_v2(tmp));
  EXPECT(INVALID_HANDLE, cuStreamDestroy_v2(tmp)); /* stale */
  EXPECT(INVALID_HANDLE, cuStreamSynchronize(tmp));
  section("streams/events: create, wrong-context and stale handles");

  /* Memory and copies. */
  fake_cuda_reset_counters();
  CUdeviceptr d0, d1, dbig;
  void *pinned = NULL;
  char *pageable = malloc(4096), *back = malloc(4096);
  for (int i = 0; i < 4096; i++) pageable[i] = (char)(i * 7);
  EXPECT(OK, cuMemAlloc_v2(&d0, 1000));
  CHECK(d0 % 256 == 0);
  EXPECT(INVALID_VALUE, cuMemAlloc_v2(&dbig, 0));
  EXPECT(OK, cuMemHostAlloc(&pinned, 4096, 1));
  EXPECT(INVALID_VALUE, cuMemHostAlloc(&pinned, 4096, 16));
  EXPECT(OK, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuMemAlloc_v2(&d1, 1000));
  EXPECT(OK, cuCtxPopCurrent_v2(NULL));
  CHECK(fake_cuda_live_device_allocations() == 2 && fake_cuda_live_host_allocations() == 1);
  memcpy(pinned, pageable, 4096);
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, pinned, 1000, s0));
  EXPECT(OK, cuMemcpyDtoHAsync_v2(back, d0, 1000, s0));
  EXPECT(OK, cuStreamSynchronize(s0));
  CHECK(memcmp(back, pageable, 1000) == 0);
  EXPECT(OK, cuMemcpyDtoDAsync_v2(d0 + 500, d0, 500, NULL)); /* NULL stream */
  EXPECT(OK, cuMemcpyPeerAsync(d1, ctx1, d0, ctx0, 1000, s0));
  EXPECT(OK, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuMemcpyDtoHAsync_v2(back, d1, 1000, s1));
  EXPECT(OK, cuCtxPopCurrent_v2(NULL));
  CHECK(memcmp(back, pageable, 500) == 0 && memcmp(back + 500, pageable, 500) == 0);
  CHECK(fake_cuda_copy_count() == 5 && fake_cuda_pageable_copy_count() == 2);
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, NULL, 0, s0)); /* n == 0 always succeeds */
  EXPECT(INVALID_VALUE, cuMemcpyHtoDAsync_v2(d0 + 900, pinned, 200, s0)); /* past the end */
  EXPECT(INVALID_VALUE, cuMemcpyHtoDAsync_v2(d1, pinned, 16, s0));        /* device 1 memory */
  EXPECT(INVALID_VALUE, cuMemcpyHtoDAsync_v2(d0, NULL, 16, s0));
  EXPECT(INVALID_VALUE, cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)pinned, pinned, 16, s0));
  EXPECT(INVALID_VALUE, cuMemcpyDtoHAsync_v2((void *)(uintptr_t)d0, d0, 16, s0)); /* swapped */
  EXPECT(INVALID_HANDLE, cuMemcpyHtoDAsync_v2(d0, pinned, 16, s1)); /* stream of device 1 */
  EXPECT(INVALID_VALUE, cuMemcpyDtoDAsync_v2(d0, d1, 16, s0));
  EXPECT(INVALID_VALUE, cuMemcpyPeerAsync(d1, ctx0, d0, ctx0, 16, s0)); /* d1 is not device 0's */
  EXPECT(INVALID_CONTEXT, cuMemcpyPeerAsync(d1, (CUcontext)pinned, d0, ctx0, 16, s0));
  CHECK(fake_cuda_copy_count() == 6);
  EXPECT(INVALID_VALUE, cuMemFree_v2(d0 + 8));
  EXPECT(INVALID_VALUE, cuMemFree_v2(0));
  EXPECT(INVALID_VALUE, cuMemFreeHost((void *)(uintptr_t)d0));
  EXPECT(INVALID_VALUE, cuMemFree_v2((CUdeviceptr)(uintptr_t)pinned));
  EXPECT(OK, cuMemFree_v2(d1)); /* another device's memory, no context needed */
  EXPECT(INVALID_VALUE, cuMemFree_v2(d1));
  EXPECT(OK, cuMemFree_v2(d0));
  EXPECT(INVALID_VALUE, cuMemcpyHtoDAsync_v2(d0, pinned, 16, s0)); /* use after free */
  EXPECT(OK, cuMemFreeHost(pinned));
  EXPECT(INVALID_VALUE, cuMemFreeHost(pinned));
  CHECK(fake_cuda_live_device_allocations() == 0 && fake_cuda_live_host_allocations() == 0);
  section("copies: round trip, peer, ranges, wrong device/stream, frees");

  /* Pools. */
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = 1;
  props.location.type = 1;
  props.location.id = 0;
  CUmemoryPool pool0, pool1, bad;
  CHECK(sizeof props == 88);
  EXPECT(OK, cuMemPoolCreate(&pool0, &props));
  props.location.id = 1;
  EXPECT(OK, cuMemPoolCreate(&pool1, &props));
  props.location.id = 2;
  EXPECT(INVALID_VALUE, cuMemPoolCreate(&bad, &props));
  props.location.id = 0;
  props.allocType = 0;
  EXPECT(INVALID_VALUE, cuMemPoolCreate(&bad, &props));
  props.allocType = 1;
  props.reserved[10] = 1;
  EXPECT(INVALID_VALUE, cuMemPoolCreate(&bad, &props));
  unsigned long long threshold = ~0ull, zero = 0;
  EXPECT(OK, cuMemPoolSetAttribute(pool0, 4, &threshold));
  EXPECT(OK, cuMemPoolSetAttribute(pool0, 8, &zero));
  EXPECT(INVALID_VALUE, cuMemPoolSetAttribute(pool0, 9, &threshold));
  EXPECT(INVALID_VALUE, cuMemPoolSetAttribute(pool0, 7, &zero));
  EXPECT(INVALID_VALUE, cuMemPoolSetAttribute(pool0, 4, NULL));
  EXPECT(INVALID_HANDLE, cuMemPoolSetAttribute((CUmemoryPool)s0, 4, &threshold));
  CUdeviceptr p0;
  EXPECT(OK, cuMemAllocFromPoolAsync(&p0, 4096, pool0, s0));
  EXPECT(INVALID_HANDLE, cuMemAllocFromPoolAsync(&dbig, 4096, pool1, s1)); /* s1 not current */
  EXPECT(INVALID_VALUE, cuMemAllocFromPoolAsync(&dbig, 4096, pool1, s0));  /* pool of device 1 */
  EXPECT(OK, cuMemcpyHtoDAsync_v2(p0, pageable, 4096, s0));
  EXPECT(INVALID_HANDLE, cuMemFreeAsync(p0, s1));
  EXPECT(OK, cuMemPoolDestroy(pool0)); /* allocation outlives the pool */
  EXPECT(INVALID_HANDLE, cuMemPoolDestroy(pool0));
  EXPECT(OK, cuMemFreeAsync(p0, s0));
  EXPECT(INVALID_VALUE, cuMemFreeAsync(p0, s0));
  EXPECT(OK, cuMemPoolDestroy(pool1));
  CHECK(fake_cuda_live_device_allocations() == 0);
  section("pools: props validation, attributes, async alloc/free");

  /* Out of memory: FAKE_CUDA_DEVICE_MEMORY_BYTES is 1 MiB. */
  CUdeviceptr a, b;
  EXPECT(OUT_OF_MEMORY, cuMemAlloc_v2(&a, (2u << 20)));
  EXPECT(OK, cuMemAlloc_v2(&a, 600 << 10));
  EXPECT(OUT_OF_MEMORY, cuMemAlloc_v2(&b, 600 << 10));
  props.reserved[10] = 0;
  props.maxSize = 4096;
  EXPECT(OK, cuMemPoolCreate(&pool0, &props));
  EXPECT(OUT_OF_MEMORY, cuMemAllocFromPoolAsync(&b, 8192, pool0, s0)); /* pool maxSize */
  EXPECT(OK, cuMemAllocFromPoolAsync(&b, 4096, pool0, s0));
  EXPECT(OK, cuMemFree_v2(a));
  EXPECT(OK, cuMemAlloc_v2(&a, 600 << 10));
  EXPECT(OK, cuMemFree_v2(a));
  EXPECT(OK, cuMemFreeAsync(b, NULL));
  EXPECT(OK, cuMemPoolDestroy(pool0));
  section("out of memory: device limit, pool maxSize");

  /* Time model: 20 ms per copy. */
  fake_cuda_set_copy_delay_us(20000);
  EXPECT(OK, cuMemHostAlloc(&pinned, 4096, 0));
  EXPECT(OK, cuMemAlloc_v2(&d0, 4096));
  double t0 = now_ms();
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, pinned, 4096, s0));
  EXPECT(OK, cuMemcpyDtoHAsync_v2(pinned, d0, 4096, s0));
  double t_enqueue = now_ms() - t0;
  EXPECT(OK, cuEventRecord(ev, s0));
  EXPECT(NOT_READY, cuEventQuery(ev));
  EXPECT(OK, cuStreamWaitEvent(s2, ev, 0)); /* s2 now waits for s0's copies */
  CUevent ev2;
  EXPECT(OK, cuEventCreate(&ev2, 0));
  EXPECT(OK, cuEventRecord(ev2, s2));
  EXPECT(NOT_READY, cuEventQuery(ev2));
  EXPECT(OK, cuStreamWaitEvent(s0, ev1, 0)); /* event of another device: allowed */
  EXPECT(INVALID_VALUE, cuStreamWaitEvent(s0, ev, 1));
  EXPECT(OK, cuEventSynchronize(ev));
  double t_ready = now_ms() - t0;
  EXPECT(OK, cuEventQuery(ev));
  EXPECT(OK, cuEventQuery(ev2));
  CHECK(t_enqueue < 10 && t_ready >= 40 && t_ready < 200);
  t0 = now_ms();
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, pageable, 4096, s0)); /* pageable: blocks */
  double t_pageable = now_ms() - t0;
  CHECK(t_pageable >= 20);
  EXPECT(OK, cuEventQuery(fresh));
  t0 = now_ms();
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, pinned, 4096, s0));
  EXPECT(OK, cuStreamSynchronize(s0));
  CHECK(now_ms() - t0 >= 20);
  printf("        enqueue 2 pinned copies %.2f ms, event ready after %.1f ms, pageable copy %.1f ms\n",
         t_enqueue, t_ready, t_pageable);
  /* Timing events: the modelled time between them, once both completed. */
  CUevent t_start, t_end;
  float ms = -1;
  EXPECT(OK, cuEventCreate(&t_start, 0));
  EXPECT(OK, cuEventCreate(&t_end, 0));
  EXPECT(OK, cuEventRecord(t_start, s0));
  EXPECT(OK, cuMemcpyHtoDAsync_v2(d0, pinned, 4096, s0));
  EXPECT(OK, cuEventRecord(t_end, s0));
  EXPECT(NOT_READY, cuEventElapsedTime(&ms, t_start, t_end));
  EXPECT(OK, cuEventSynchronize(t_end));
  EXPECT(OK, cuEventElapsedTime(&ms, t_start, t_end));
  CHECK(ms >= 19.9f && ms < 200.0f);
  EXPECT(INVALID_HANDLE, cuEventElapsedTime(&ms, ev, t_end)); /* ev: DISABLE_TIMING */
  EXPECT(OK, cuEventDestroy_v2(t_start));
  EXPECT(OK, cuEventDestroy_v2(t_end));
  fake_cuda_set_copy_delay_us(0);
  EXPECT(OK, cuEventDestroy_v2(ev2));
  section("time model: NOT_READY until busy_until, waits, pageable blocks");

  /* Peers, pool access, modules and launches (libmtc's kernels). */
  int can = -1;
  EXPECT(OK, cuDeviceCanAccessPeer(&can, 0, 1));
  CHECK(can == 1);
  EXPECT(OK, cuDeviceCanAccessPeer(&can, 1, 1));
  CHECK(can == 0);
  EXPECT(INVALID_DEVICE, cuDeviceCanAccessPeer(&can, 0, 2));
  EXPECT(INVALID_VALUE, cuDeviceCanAccessPeer(NULL, 0, 1));
  char name[32];
  size_t total = 0;
  EXPECT(OK, cuDeviceGetName(name, sizeof name, 1));
  CHECK(strcmp(name, "Emulated GPU 1") == 0);
  EXPECT(OK, cuDeviceTotalMem_v2(&total, 0));
  CHECK(total > 0);
  EXPECT(INVALID_DEVICE, cuDeviceGetName(name, sizeof name, 2));
  EXPECT(INVALID_DEVICE, cuCtxEnablePeerAccess(ctx0, 0)); /* itself */
  EXPECT(INVALID_VALUE, cuCtxEnablePeerAccess(ctx1, 1));
  EXPECT(INVALID_CONTEXT, cuCtxEnablePeerAccess((CUcontext)pinned, 0));

  props.maxSize = 0;
  props.location.id = 1;
  EXPECT(OK, cuMemPoolCreate(&pool1, &props)); /* device 1's pool */
  CUmemAccessDesc acc[2] = {{{1, 0}, 3}, {{1, 1}, 3}};
  EXPECT(OK, cuMemPoolSetAccess(pool1, acc, 2)); /* device 0 read-write; owner stays */
  acc[1].flags = 0;
  EXPECT(INVALID_VALUE, cuMemPoolSetAccess(pool1, acc, 2)); /* takes the owner's away */
  acc[1] = (CUmemAccessDesc){{2, 0}, 3};
  EXPECT(INVALID_VALUE, cuMemPoolSetAccess(pool1, acc, 2)); /* not a device location */
  acc[1] = (CUmemAccessDesc){{1, 5}, 3};
  EXPECT(INVALID_DEVICE, cuMemPoolSetAccess(pool1, acc, 2));
  acc[1] = (CUmemAccessDesc){{1, 0}, 2};
  EXPECT(INVALID_VALUE, cuMemPoolSetAccess(pool1, acc, 2)); /* flags 2 */
  EXPECT(INVALID_VALUE, cuMemPoolSetAccess(pool1, NULL, 1));
  EXPECT(INVALID_HANDLE, cuMemPoolSetAccess((CUmemoryPool)s0, acc, 1));

  CUmodule mod, mod1, dead_mod;
  CUfunction fseg, ffill, fcopy, f1, fnone;
  EXPECT(INVALID_VALUE, cuModuleLoadData(&mod, NULL));
  /* A fatbin's first bytes (its magic) stand for the library's image. */
  static const unsigned char fatbin[] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0};
  EXPECT(INVALID_IMAGE, cuModuleLoadData(&mod, "not a module"));
  EXPECT(OK, cuModuleLoadData(&mod, fatbin));
  CHECK(fake_cuda_live_modules() == 1);
  EXPECT(OK, cuModuleGetFunction(&fseg, mod, "mtc_copy_segments"));
  EXPECT(OK, cuModuleGetFunction(&ffill, mod, "mtc_debug_fill"));
  EXPECT(OK, cuModuleGetFunction(&fcopy, mod, "mtc_debug_copy"));
  EXPECT(NOT_FOUND, cuModuleGetFunction(&fnone, mod, "no_such_kernel"));
  EXPECT(INVALID_HANDLE, cuModuleGetFunction(&fnone, (CUmodule)s0, "mtc_debug_fill"));
  fake_cuda_fail_module_loads(NO_BINARY_FOR_GPU);
  EXPECT(NO_BINARY_FOR_GPU, cuModuleLoadData(&dead_mod, fatbin));
  fake_cuda_fail_module_loads(0);

  unsigned long long launches0 = fake_cuda_kernel_launches();
  CUdeviceptr k0;
  EXPECT(OK, cuMemAlloc_v2(&k0, 4096));
  unsigned char *kbytes = (unsigned char *)(uintptr_t)k0; /* device memory is host memory here */
  unsigned long long dst = k0, nbytes = 1000;
  unsigned val = 0xAB, spin = 30000;
  void *fill_args[] = {&dst, &nbytes, &val, &spin};
  t0 = now_ms();
  EXPECT(OK, cuLaunchKernel(ffill, 1, 1, 1, 256, 1, 1, 0, s0, fill_args, NULL));
  EXPECT(OK, cuEventRecord(ev, s0));
  EXPECT(NOT_READY, cuEventQuery(ev)); /* the spin */
  CHECK(kbytes[0] == 0xAB && kbytes[999] == 0xAB && kbytes[1000] == 0xCD);
  EXPECT(OK, cuEventSynchronize(ev));
  CHECK(now_ms() - t0 >= 30);
  unsigned long long src = k0, cdst = k0 + 2048;
  void *copy_args[] = {&cdst, &src, &nbytes};
  EXPECT(OK, cuLaunchKernel(fcopy, 4, 1, 1, 256, 1, 1, 0, s0, copy_args, NULL));
  CHECK(memcmp(kbytes + 2048, kbytes, 1000) == 0);
  cdst = k0 + 500;
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(fcopy, 4, 1, 1, 256, 1, 1, 0, s0, copy_args, NULL)); /* overlap */
  cdst = k0 + 3500;
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(fcopy, 4, 1, 1, 256, 1, 1, 0, s0, copy_args, NULL)); /* past the end */
  dst = (unsigned long long)(uintptr_t)pageable;
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(ffill, 1, 1, 1, 256, 1, 1, 0, s0, fill_args, NULL)); /* pageable */

  /* PTX modules: .entry kernels with their parameters' declared sizes;
   * add_one_f32 runs, others record only; every launch is recorded. */
  static const char ptx[] =
      ".version 8.0\n.target sm_80\n.address_size 64\n"
      ".visible .entry add_one_f32(\n .param .u64 p,\n .param .u32 n\n) { ret; }\n"
      ".visible .entry mixed(.param .s32 a, .param .f64 b, .param .align 4 .b8 c[12], .param .u16 d) { ret; }\n";
  CUmodule pmod;
  CUfunction fadd, fmixed;
  EXPECT(OK, cuModuleLoadData(&pmod, ptx));
  EXPECT(OK, cuModuleGetFunction(&fadd, pmod, "add_one_f32"));
  EXPECT(OK, cuModuleGetFunction(&fmixed, pmod, "mixed"));
  EXPECT(NOT_FOUND, cuModuleGetFunction(&fnone, pmod, "add_one"));
  EXPECT(NOT_FOUND, cuModuleGetFunction(&fnone, pmod, "mtc_debug_fill"));
  EXPECT(OK, cuMemsetD8Async(k0, 0, 64, s0));
  CHECK(kbytes[0] == 0 && kbytes[63] == 0 && kbytes[64] == 0xAB);
  EXPECT(INVALID_VALUE, cuMemsetD8Async(k0 + 4000, 0, 200, s0));
  unsigned long long pa = k0;
  unsigned na = 10;
  void *add_args[] = {&pa, &na};
  EXPECT(OK, cuLaunchKernel(fadd, 1, 1, 1, 8, 1, 1, 0, s0, add_args, NULL)); /* covers 8 of 10 */
  float fv[10];
  memcpy(fv, kbytes, sizeof fv);
  CHECK(fv[0] == 1.0f && fv[7] == 1.0f && fv[8] == 0.0f);
  unsigned dims[8];
  unsigned char rec[32];
  CHECK(fake_cuda_last_launch(dims, rec, sizeof rec) == 12 && dims[3] == 8 && dims[7] == 2);
  CHECK(memcmp(rec, &pa, 8) == 0 && memcmp(rec + 8, &na, 4) == 0);
  int ai = -7;
  double bd = 2.5;
  unsigned char cb[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  unsigned short du = 0xBEEF;
  void *mixed_args[] = {&ai, &bd, cb, &du};
  EXPECT(OK, cuLaunchKernel(fmixed, 2, 3, 4, 5, 6, 7, 96, s0, mixed_args, NULL));
  CHECK(fake_cuda_last_launch(dims, rec, sizeof rec) == 26);
  CHECK(dims[0] == 2 && dims[1] == 3 && dims[2] == 4 && dims[3] == 5 && dims[4] == 6 && dims[5] == 7 &&
        dims[6] == 96 && dims[7] == 4);
  CHECK(memcmp(rec, &ai, 4) == 0 && memcmp(rec + 4, &bd, 8) == 0 && memcmp(rec + 12, cb, 12) == 0 &&
        memcmp(rec + 24, &du, 2) == 0);
  CHECK(fake_cuda_last_launch_stream() == (unsigned long long)(uintptr_t)s0);
  EXPECT(OK, cuModuleUnload(pmod));
  /* A .target newer than the emulated sm_90 fails the JIT, with a log. */
  char jit_log[256];
  CUjit_option jit_options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *jit_values[] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
  EXPECT(INVALID_PTX, cuModuleLoadDataEx(&pmod, ".version 8.0\n.target sm_100\n", 2, jit_options, jit_values));
  CHECK(strstr(jit_log, ".target sm_100 is newer than this GPU (sm_90)") != NULL);
  CHECK((uintptr_t)jit_values[1] == strlen(jit_log));
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, ".version 8.0\n.target sm_100\n"));
  /* What a real JIT also refuses: no .version first, no .target next, no
   * .entry, braces that do not balance; the reason goes to the log. */
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, "garbage .version 8.0\n.target sm_80\n.entry k() { }\n"));
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, ".version eight\n.target sm_80\n.entry k() { }\n"));
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, ".version 8.0\n.entry k() { }\n.target sm_80\n"));
  jit_values[1] = (void *)(uintptr_t)sizeof jit_log;
  EXPECT(INVALID_PTX, cuModuleLoadDataEx(&pmod, ".version 8.0\n.target sm_80\n", 2, jit_options, jit_values));
  CHECK(strstr(jit_log, "no .entry directive") != NULL);
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, ".version 8.0\n.target sm_80\n.entry k() { {\n"));
  EXPECT(INVALID_PTX, cuModuleLoadData(&pmod, ".version 8.0\n.target sm_80\n.entry k() } {\n"));
  EXPECT(OK, cuModuleLoadData(&pmod, "// a comment\n/* another */ .version 8.0\n.target sm_80\n.entry k() { }\n"));
  EXPECT(OK, cuModuleUnload(pmod));
  EXPECT(OK, cuModuleLoadDataEx(&pmod, ptx, 0, NULL, NULL));
  EXPECT(OK, cuModuleUnload(pmod));

  /* Segments: table in pinned memory, device and pinned destinations, an
   * empty segment with made-up addresses (never touched). */
  unsigned long long *table = pinned; /* {src, dst, bytes} x 3 */
  unsigned char *pinned_out = (unsigned char *)pinned + 512;
  memset(pinned_out, 0, 64);
  unsigned long long segs[9] = {k0, k0 + 3000, 100, k0 + 100, (unsigned long long)(uintptr_t)pinned_out, 50, 1, 2, 0};
  memcpy(table, segs, sizeof segs);
  unsigned long long table_arg = (unsigned long long)(uintptr_t)table;
  unsigned nseg = 3;
  void *seg_args[] = {&table_arg, &nseg};
  EXPECT(OK, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  CHECK(memcmp(kbytes + 3000, kbytes, 100) == 0 && memcmp(pinned_out, kbytes + 100, 50) == 0);
  table_arg = (unsigned long long)(uintptr_t)pageable;
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL)); /* table */
  table_arg = (unsigned long long)(uintptr_t)table;

  /* Another device's memory: cuMemAlloc memory needs cuCtxEnablePeerAccess,
   * pool memory cuMemPoolSetAccess (read-write given above). */
  CUdeviceptr r1, p1;
  EXPECT(OK, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuMemAlloc_v2(&r1, 256));
  EXPECT(OK, cuMemAllocFromPoolAsync(&p1, 256, pool1, s1));
  EXPECT(OK, cuModuleLoadData(&mod1, fatbin));
  EXPECT(OK, cuModuleGetFunction(&f1, mod1, "mtc_debug_fill"));
  EXPECT(OK, cuCtxPopCurrent_v2(NULL));
  table[0] = r1;
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(OK, cuCtxEnablePeerAccess(ctx1, 0));
  EXPECT(PEER_ACCESS_ALREADY_ENABLED, cuCtxEnablePeerAccess(ctx1, 0));
  EXPECT(OK, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  table[0] = k0;
  table[1] = p1; /* write device 1's pool memory */
  EXPECT(OK, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  acc[0] = (CUmemAccessDesc){{1, 0}, 1};
  EXPECT(OK, cuMemPoolSetAccess(pool1, acc, 1)); /* device 0: read only */
  EXPECT(ILLEGAL_ADDRESS, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  table[0] = p1; /* reading it is still allowed */
  table[1] = k0 + 3000;
  EXPECT(OK, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));

  /* Launch arguments and handles. */
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 0, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 1, 70000, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 1, 1, 1, 2048, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 64 << 10, s0, seg_args, NULL));
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, NULL, NULL));
  EXPECT(INVALID_VALUE, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, seg_args));
  EXPECT(INVALID_HANDLE, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s1, seg_args, NULL)); /* s1: device 1 */
  EXPECT(INVALID_HANDLE, cuLaunchKernel(f1, 1, 1, 1, 256, 1, 1, 0, s0, fill_args, NULL)); /* f1: device 1 */
  EXPECT(INVALID_HANDLE, cuLaunchKernel((CUfunction)s0, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(OK, cuCtxSetCurrent(NULL));
  EXPECT(INVALID_CONTEXT, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  EXPECT(OK, cuCtxSetCurrent(ctx0));
  CHECK(fake_cuda_kernel_launches() == launches0 + 8);

  EXPECT(OK, cuModuleUnload(mod));
  EXPECT(INVALID_HANDLE, cuModuleUnload(mod));
  EXPECT(INVALID_HANDLE, cuLaunchKernel(fseg, 1, 1, 1, 256, 1, 1, 0, s0, seg_args, NULL));
  CHECK(fake_cuda_live_modules() == 1); /* mod1 */
  EXPECT(OK, cuMemFree_v2(k0));
  EXPECT(OK, cuMemFree_v2(r1));
  EXPECT(OK, cuMemFree_v2(p1));
  EXPECT(OK, cuMemPoolDestroy(pool1));
  section("kernels: peers, pool access, modules, emulated launches and their checks");

  /* Threads: no context on a new thread; concurrent use of one context. */
  struct worker w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i].ctx = ctx0;
    w[i].foreign_event = fresh;
    w[i].errors = 0;
    pthread_create(&th[i], NULL, worker_main, &w[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(w[i].errors == 0);
  }
  CHECK(fake_cuda_live_device_allocations() == 1); /* d0 */
  section("threads: per-thread current context, 4 x 2000 concurrent round trips");

  /* Counters and release. */
  CHECK(fake_cuda_copy_count() > 16000);
  fake_cuda_reset_counters();
  CHECK(fake_cuda_copy_count() == 0 && fake_cuda_pageable_copy_count() == 0);
  CHECK(fake_cuda_kernel_launches() == 0);
  EXPECT(OK, cuDevicePrimaryCtxRelease_v2(1)); /* destroys s1, ev1 and mod1 */
  CHECK(fake_cuda_live_modules() == 0);
  EXPECT(INVALID_HANDLE, cuModuleGetFunction(&f1, mod1, "mtc_debug_fill"));
  EXPECT(INVALID_CONTEXT, cuDevicePrimaryCtxRelease_v2(1));
  EXPECT(INVALID_HANDLE, cuStreamDestroy_v2(s1));
  EXPECT(INVALID_HANDLE, cuEventQuery(ev1));
  EXPECT(INVALID_CONTEXT, cuCtxPushCurrent_v2(ctx1));
  EXPECT(OK, cuMemFree_v2(d0));
  EXPECT(OK, cuMemFreeHost(pinned));
  EXPECT(OK, cuStreamDestroy_v2(s0));
  EXPECT(OK, cuStreamDestroy_v2(s2));
  EXPECT(OK, cuEventDestroy_v2(ev));
  EXPECT(OK, cuEventDestroy_v2(fresh));
  CHECK(fake_cuda_live_streams() == 0 && fake_cuda_live_events() == 0);
  CHECK(fake_cuda_live_device_allocations() == 0 && fake_cuda_live_host_allocations() == 0);
  EXPECT(OK, cuDevicePrimaryCtxRelease_v2(0));
  EXPECT(INVALID_CONTEXT, cuCtxGetDevice(&dev)); /* current context released */
  section("counters and release: reset, stale handles after release, no leaks");

  free(pageable);
  free(back);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures != 0;
}
