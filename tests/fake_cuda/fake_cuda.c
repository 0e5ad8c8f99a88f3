/* fake_cuda.c — an emulated CUDA driver (libcuda.so.1) for libmtc's tests:
 * its global state, failure lines, time model, error names, cuInit and the
 * test-only exports. The other driver areas are the other fake_*.c files
 * (fake_cuda.h lists them).
 *
 * CI machines have no GPU, so tests point MTC_CUDA_DRIVER at libfakecuda.so,
 * and libmtc drives it as it drives the real driver. Device memory is host
 * memory, copies are memcpy, and a small time model makes asynchrony
 * observable.
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
 *   FAKE_CUDA_NO_PEER               1: no two devices are peers (default 0)
 *   FAKE_CUDA_CHECK_RACES           1: the race check on pinned memory
 *                                   (fake_races.c; read on first use)
 *   FAKE_CUDA_QUIET                 1: no stderr line for failed calls
 *   FAKE_CUDA_LOG                   a file: failed calls' lines are appended
 *                                   there instead of stderr (the test script
 *                                   shows them when a suite fails)
 *
 * Time model: each stream has busy_until (CLOCK_MONOTONIC, ns). A copy does
 * its memcpy at once and moves busy_until to max(busy_until, now) + delay.
 * cuEventRecord captures max(busy_until, now); queries and synchronizes compare with,
 * or sleep until, that time. Copies from or to pageable (not cuMemHostAlloc)
 * host memory block the caller until the copy's modelled end, as the real
 * driver does.
 *
 * Kernels: cuModuleLoadData accepts a fatbin, an ELF cubin, PTX text or the
 * test builds' stand-in image, and fails others with INVALID_IMAGE;
 * cuModuleGetFunction knows the kernels of libmtc's cuda/ kernels by name in
 * binary images and the .entry kernels of PTX text, and cuLaunchKernel runs
 * them on the host (see fake_launch.c) with the same checks and time model
 * as copies.
 */
#include "fake_cuda.h"

/* ============================================================ global state */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int g_init_state;           /* INIT_*; read without the lock */
int g_device_count;
uint64_t g_device_mem_limit;       /* per device */
uint64_t g_pinned_limit;           /* 0: no limit */
uint64_t g_pinned_used;
uint64_t g_copy_delay_ns;
/* fake_cuda_set_copy_delay_us was called: cuInit keeps its value. */
int g_copy_delay_set;
int g_no_peer; /* FAKE_CUDA_NO_PEER: no pair of devices has peer access */
unsigned long long g_copy_count;
unsigned long long g_pageable_copy_count;
unsigned long long g_launch_count;
CUresult g_module_load_error; /* fake_cuda_fail_module_loads */
struct fake_ctx g_ctx[FAKE_MAX_DEVICES];
struct alloc_list g_dev_allocs, g_host_allocs;

/* Per-thread context stack; the top is the current context. */
_Thread_local struct fake_ctx *t_ctx_stack[FAKE_MAX_CTX_DEPTH];
_Thread_local int t_ctx_depth;

void lock(void) { pthread_mutex_lock(&g_lock); }
void unlock(void) { pthread_mutex_unlock(&g_lock); }

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
__attribute__((format(printf, 3, 4))) CUresult report(CUresult r, const char *fn,
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

uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sleep_until(uint64_t t) {
  struct timespec ts;
  ts.tv_sec = (time_t)(t / 1000000000u);
  ts.tv_nsec = (long)(t % 1000000000u);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
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
    g_no_peer = (int)env_u64("FAKE_CUDA_NO_PEER", 0, 1);
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
