/* test_kernels.c — libmtc's CUDA kernels (cuda/): the segment-copy kernel
 * through lib/src/cuda/kernels.h, and the test kernels of mtc.h (mtc_has_kernels,
 * mtc_debug_fill, mtc_debug_copy).
 *
 *   test_kernels DRIVER kernels         emulated driver (libfakecuda.so), kernels
 *                                       built in (or a stand-in image without nvcc)
 *   test_kernels_none DRIVER none       a libmtc built without kernels
 *   test_kernels DRIVER no-module-api   a driver without cuModuleLoadData & co.
 *   test_kernels                        the real driver (libcuda.so.1) on a GPU:
 *                                       the real kernels, bytes compared, and
 *                                       timings (MTC_TEST_QUICK=1: fewer rounds,
 *                                       no timings)
 *
 * Against the emulated driver, device memory is host memory and kernels run
 * on the host; every check that does not need the emulation (its counters,
 * its refusals of bad addresses, a second device) also runs on a real GPU.
 * Data is always checked through the driver's copies, so the same code
 * checks both. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"
#include "cuda/driver.h"
#include "cuda/device.h"
#include "base/error.h"
#include "cuda/kernels.h"

/* ------------------------------------------------------------- the driver */

/* The emulated driver's test-only exports (NULL on a real driver). */
static struct {
  unsigned long long (*kernel_launches)(void);
  int (*live_modules)(void);
  void (*fail_module_loads)(int result);
  void (*set_copy_delay_us)(unsigned long long us);
} fake;

static int is_fake;
static const mtc_cuda_api *cu;
static int32_t device_count;

static void load_fake(const char *path) {
  void *handle = fake_open(path);
  if (handle == NULL) return;
  FAKE_SYM(handle, fake.kernel_launches, "fake_cuda_kernel_launches");
  FAKE_SYM(handle, fake.live_modules, "fake_cuda_live_modules");
  FAKE_SYM(handle, fake.fail_module_loads, "fake_cuda_fail_module_loads");
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
}

static unsigned long long launches(void) {
  return fake.kernel_launches ? fake.kernel_launches() : 0;
}

/* A driver call that must succeed. */
#define CU_OK(call)                                                     \
  do {                                                                  \
    check_count++;                                                      \
    CUresult cu_ok_r_ = (call);                                         \
    if (cu_ok_r_ != CUDA_SUCCESS) {                                     \
      check_failures++;                                                 \
      printf("FAIL %s:%d: %s returned %d (%s)\n", __FILE__, __LINE__,  \
             #call, cu_ok_r_, mtc_cuda_error_name(cu_ok_r_));           \
    }                                                                   \
  } while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }

/* Raw driver helpers; the device's context must be current. */
static CUdeviceptr dev_alloc(size_t bytes) {
  CUdeviceptr p = 0;
  CU_OK(cu->cuMemAlloc_v2(&p, bytes ? bytes : 1));
  return p;
}

static void *pinned_alloc(size_t bytes) {
  void *p = NULL;
  /* PORTABLE | DEVICEMAP: reachable from every context, at the same address. */
  CU_OK(cu->cuMemHostAlloc(&p, bytes ? bytes : 1, 1u | 2u));
  return p;
}

static void to_device(CUdeviceptr dst, const void *src, size_t bytes,
                      CUstream s) {
  CU_OK(cu->cuMemcpyHtoDAsync_v2(dst, src, bytes, s));
  CU_OK(cu->cuStreamSynchronize(s));
}

static void to_host(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
  CU_OK(cu->cuMemcpyDtoHAsync_v2(dst, src, bytes, s));
  CU_OK(cu->cuStreamSynchronize(s));
}

static void push(mtc_device *d) { CU_OK(cu->cuCtxPushCurrent_v2(d->context)); }
static void pop(void) {
  CUcontext popped;
  CU_OK(cu->cuCtxPopCurrent_v2(&popped));
}

/* The caller's thread has no current context after libmtc's calls. */
static void check_no_context_left(void) {
  CUcontext ctx = (CUcontext)1;
  CU_OK(cu->cuCtxGetCurrent(&ctx));
  CHECK(ctx == NULL);
}

/* Compares got with want; on a difference prints where (once). */
static int same_bytes(const char *what, const uint8_t *got,
                      const uint8_t *want, size_t n) {
  check_count++;
  for (size_t i = 0; i < n; i++) {
    if (got[i] != want[i]) {
      check_failures++;
      printf("FAIL %s: byte %zu of %zu is 0x%02x, want 0x%02x\n", what, i, n,
             got[i], want[i]);
      return 0;
    }
  }
  return 1;
}

/* --------------------------------------------------------- segment copies */

#define GUARD 0xEE

/* How segment offsets are aligned: random (0..63 bytes past a 64-byte
 * boundary) or given per segment. */
typedef struct seg_spec {
  uint64_t bytes;
  int src_misalign; /* -1: random */
  int dst_misalign;
} seg_spec;

enum { DST_HOST = 0, DST_DEVICE = 1 };

/* Lays the segments out in a device source buffer and a destination buffer
 * (pinned host or device memory; segments in shuffled order there, with
 * gaps), copies them with one mtc_kernels_copy_segments call, and checks
 * every destination byte: segments hold their source, gaps keep GUARD. */
static void run_segments(mtc_device *d, CUstream s, const char *name,
                         const seg_spec *specs, uint32_t n, int dst_kind) {
  uint64_t *src_off = calloc(n ? n : 1, sizeof *src_off);
  uint64_t *dst_off = calloc(n ? n : 1, sizeof *dst_off);
  uint32_t *order = calloc(n ? n : 1, sizeof *order);
  uint64_t src_size = 0, dst_size = 0;
  for (uint32_t i = 0; i < n; i++) {
    int m = specs[i].src_misalign < 0 ? (int)below(64) : specs[i].src_misalign;
    src_size = (src_size + 63) / 64 * 64 + (uint64_t)m;
    src_off[i] = src_size;
    src_size += specs[i].bytes + below(3);
    order[i] = i;
  }
  for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
    uint32_t j = (uint32_t)below(i);
    uint32_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = order[k];
    int m = specs[i].dst_misalign < 0 ? (int)below(64) : specs[i].dst_misalign;
    dst_size = (dst_size + 63) / 64 * 64 + (uint64_t)m;
    dst_off[i] = dst_size;
    dst_size += specs[i].bytes + below(3);
  }
  src_size += 64;
  dst_size += 64;

  uint8_t *host_src = malloc(src_size);
  uint8_t *want = malloc(dst_size);
  uint8_t *got = malloc(dst_size);
  for (uint64_t i = 0; i < src_size; i += 8) {
    uint64_t word = next_u64();
    memcpy(host_src + i, &word, src_size - i < 8 ? src_size - i : 8);
  }
  memset(want, GUARD, dst_size);
  for (uint32_t i = 0; i < n; i++) {
    memcpy(want + dst_off[i], host_src + src_off[i], specs[i].bytes);
  }

  push(d);
  CUdeviceptr src = dev_alloc(src_size);
  to_device(src, host_src, src_size, s);
  CUdeviceptr dst_dev = 0;
  uint8_t *dst_host = NULL;
  uint64_t dst_base;
  if (dst_kind == DST_DEVICE) {
    dst_dev = dev_alloc(dst_size);
    uint8_t *guard = malloc(dst_size);
    memset(guard, GUARD, dst_size);
    to_device(dst_dev, guard, dst_size, s);
    free(guard);
    dst_base = dst_dev;
  } else {
    dst_host = pinned_alloc(dst_size);
    memset(dst_host, GUARD, dst_size);
    dst_base = (uint64_t)(uintptr_t)dst_host;
  }
  mtc_segment *table = pinned_alloc((size_t)n * sizeof *table);
  for (uint32_t i = 0; i < n; i++) {
    table[i].src = src + src_off[i];
    table[i].dst = dst_base + dst_off[i];
    table[i].bytes = specs[i].bytes;
  }

  mtc_status status = mtc_kernels_copy_segments(d, s, table, n);
  if (status != MTC_OK) {
    printf("FAIL %s: mtc_kernels_copy_segments returned %s: %s\n", name,
           mtc_status_name(status), mtc_last_error());
  }
  CHECK(status == MTC_OK);
  CU_OK(cu->cuStreamSynchronize(s));
  if (dst_kind == DST_DEVICE) {
    to_host(got, dst_dev, dst_size, s);
  } else {
    memcpy(got, dst_host, dst_size);
  }
  char what[160];
  snprintf(what, sizeof what, "%s (%u segments, %s destination)", name, n,
           dst_kind == DST_DEVICE ? "device" : "pinned host");
  same_bytes(what, got, want, dst_size);

  CU_OK(cu->cuMemFreeHost(table));
  if (dst_host) CU_OK(cu->cuMemFreeHost(dst_host));
  if (dst_dev) CU_OK(cu->cuMemFree_v2(dst_dev));
  CU_OK(cu->cuMemFree_v2(src));
  pop();
  free(host_src);
  free(want);
  free(got);
  free(src_off);
  free(dst_off);
  free(order);
}

static void test_segment_copies(mtc_device *d, CUstream s) {
  static const uint64_t edge_sizes[] = {
      0,     1,     2,     3,     15,    16,    17,      31,     32,
      33,    63,    64,    65,    127,   128,   255,     256,    1000,
      4095,  4096,  4097,  8191,  8192,  65535, 65536,   65537,  200001,
      1 << 20, (1 << 20) + 3, 3 * (1 << 20) + 7};
  enum { EDGE = sizeof edge_sizes / sizeof edge_sizes[0] };
  seg_spec specs[EDGE];

  /* Every size 0..300, random alignments. */
  seg_spec small[301];
  for (int i = 0; i <= 300; i++) small[i] = (seg_spec){(uint64_t)i, -1, -1};
  run_segments(d, s, "sizes 0..300", small, 301, DST_HOST);
  run_segments(d, s, "sizes 0..300", small, 301, DST_DEVICE);

  /* Sizes around every threshold of the kernel, random alignments. */
  for (int i = 0; i < EDGE; i++) specs[i] = (seg_spec){edge_sizes[i], -1, -1};
  run_segments(d, s, "edge sizes", specs, EDGE, DST_HOST);
  run_segments(d, s, "edge sizes", specs, EDGE, DST_DEVICE);

  /* Every relative alignment: source 0..15 past 16-byte alignment against
   * destination 0..15, at a warp-sized and a block-sized length. */
  seg_spec aligned[16 * 16 * 2];
  uint32_t count = 0;
  for (int sa = 0; sa < 16; sa++) {
    for (int da = 0; da < 16; da++) {
      aligned[count++] = (seg_spec){100 + below(200), sa, da};
      aligned[count++] = (seg_spec){70000 + below(5000), sa, da};
    }
  }
  run_segments(d, s, "all alignments", aligned, count, DST_DEVICE);
  run_segments(d, s, "all alignments", aligned, count, DST_HOST);

  /* Thousands of small segments in one launch. */
  enum { MANY = 5000 };
  seg_spec *many = calloc(MANY, sizeof *many);
  for (int i = 0; i < MANY; i++) many[i] = (seg_spec){below(600), -1, -1};
  run_segments(d, s, "5000 small segments", many, MANY, DST_HOST);
  run_segments(d, s, "5000 small segments", many, MANY, DST_DEVICE);

  /* One large segment among many tiny ones (few parts per segment). */
  many[0] = (seg_spec){(8u << 20) + 5, 3, 0};
  for (int i = 1; i < 3000; i++) many[i] = (seg_spec){1 + below(64), -1, -1};
  run_segments(d, s, "8 MiB among 2999 tiny", many, 3000, DST_DEVICE);

  /* One very large segment, aligned and not. */
  seg_spec big[2] = {{32u << 20, 0, 0}, {(24u << 20) + 11, 1, 6}};
  run_segments(d, s, "large", big, 2, DST_DEVICE);
  free(many);

  /* n == 0, and only empty segments: nothing to launch. */
  unsigned long long before = launches();
  seg_spec empty[3] = {{0, -1, -1}, {0, -1, -1}, {0, -1, -1}};
  run_segments(d, s, "empty segments", empty, 3, DST_DEVICE);
  push(d);
  CHECK_OK(mtc_kernels_copy_segments(d, s, NULL, 0));
  pop();
  CHECK_EQ_U64(launches(), before);

  /* One launch per call otherwise. */
  seg_spec one[1] = {{100, -1, -1}};
  run_segments(d, s, "one segment", one, 1, DST_DEVICE);
  if (is_fake) CHECK_EQ_U64(launches(), before + 1);

  push(d);
  CHECK_STATUS(mtc_kernels_copy_segments(d, s, NULL, 1),
               MTC_ERR_INVALID_ARGUMENT);
  pop();
}

/* Random segment sets, for the real GPU: sizes log-uniform up to 1 MiB,
 * random alignments and destinations. */
static void test_random_segments(mtc_device *d, CUstream s, int rounds) {
  for (int r = 0; r < rounds; r++) {
    uint32_t n = 1 + (uint32_t)below(r % 4 == 0 ? 1000 : 300);
    seg_spec *specs = calloc(n, sizeof *specs);
    for (uint32_t i = 0; i < n; i++) {
      int bits = (int)below(21);
      specs[i] = (seg_spec){below((uint64_t)1 << bits), -1, -1};
    }
    char name[64];
    snprintf(name, sizeof name, "random round %d", r);
    run_segments(d, s, name, specs, n, r % 2 ? DST_DEVICE : DST_HOST);
    free(specs);
  }
}

/* ------------------------------------------------------------ debug fill */

static void test_debug_kernels(mtc_device *d, CUstream s) {
  uint64_t stream = (uint64_t)(uintptr_t)s;
  enum { SIZE = 1 << 20 };
  uint8_t *want = malloc(SIZE), *got = malloc(SIZE);
  push(d);
  CUdeviceptr buf = dev_alloc(SIZE);
  CUdeviceptr other = dev_alloc(SIZE);
  memset(want, GUARD, SIZE);
  to_device(buf, want, SIZE, s);
  pop();

  /* Fills of many sizes and alignments; bytes around them untouched. */
  static const uint64_t sizes[] = {0, 1, 5, 16, 17, 100, 4096, 65537, 300000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    uint64_t off = 1 + below(4096);
    uint8_t value = (uint8_t)(1 + i * 29);
    CHECK_OK(mtc_debug_fill(d->ordinal, stream, buf + off, sizes[i], value, 0));
    memset(want + off, value, sizes[i]);
  }
  check_no_context_left();
  push(d);
  to_host(got, buf, SIZE, s);
  pop();
  same_bytes("debug fill", got, want, SIZE);

  /* Kernel copies, device to device, random ranges. */
  for (int i = 0; i < 8; i++) {
    uint64_t bytes = below(i < 4 ? 300 : 200000);
    uint64_t so = below(SIZE / 2 - bytes), doff = SIZE / 2 + below(SIZE / 2 - bytes);
    CHECK_OK(mtc_debug_copy(d->ordinal, stream, buf + doff, buf + so, bytes));
    memmove(want + doff, want + so, bytes);
  }
  push(d);
  to_host(got, buf, SIZE, s);
  pop();
  same_bytes("debug copy", got, want, SIZE);

  /* A kernel copy into pinned host memory (unified addressing). */
  push(d);
  uint8_t *pinned = pinned_alloc(4096);
  pop();
  memset(pinned, 0, 4096);
  CHECK_OK(mtc_debug_copy(d->ordinal, stream, (uint64_t)(uintptr_t)pinned + 3,
                          buf + 100, 4000));
  push(d);
  CU_OK(cu->cuStreamSynchronize(s));
  pop();
  same_bytes("debug copy to pinned memory", pinned + 3, want + 100, 4000);

  /* The spin: an event recorded after the fill completes only once the
   * spin has passed, and work after it sees the filled bytes. */
  const uint32_t spin_us = 100000;
  push(d);
  CUevent event;
  CU_OK(cu->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  pop();
  double start = now_ms();
  CHECK_OK(mtc_debug_fill(d->ordinal, stream, other, SIZE, 0x5A, spin_us));
  push(d);
  CU_OK(cu->cuEventRecord(event, s));
  CHECK(cu->cuEventQuery(event) == CUDA_ERROR_NOT_READY);
  CU_OK(cu->cuEventSynchronize(event));
  double waited = now_ms() - start;
  check_count++;
  if (waited < spin_us / 1000.0 * 0.9) {
    check_failures++;
    printf("FAIL spin: the event completed after %.1f ms, the spin is %u us\n",
           waited, spin_us);
  }
  to_host(got, other, SIZE, s);
  pop();
  memset(want, 0x5A, SIZE);
  same_bytes("fill after spin", got, want, SIZE);

  /* A spin alone (0 bytes) delays the stream too. */
  start = now_ms();
  CHECK_OK(mtc_debug_fill(d->ordinal, stream, 0, 0, 0, 30000));
  push(d);
  CU_OK(cu->cuEventRecord(event, s));
  CHECK(cu->cuEventQuery(event) == CUDA_ERROR_NOT_READY);
  CU_OK(cu->cuEventSynchronize(event));
  pop();
  CHECK(now_ms() - start >= 27.0);
  check_no_context_left();

  /* Bad arguments, refused before any launch. */
  unsigned long long before = launches();
  CHECK_STATUS(mtc_debug_fill(d->ordinal, 0, buf, 16, 1, 0),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "stream is 0");
  CHECK_STATUS(mtc_debug_fill(d->ordinal, stream, buf, 16, 256, 0),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "256");
  CHECK_STATUS(mtc_debug_fill(d->ordinal, stream, 0, 16, 1, 0),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_debug_fill(d->ordinal, stream, UINT64_MAX - 4, 16, 1, 0),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "wraps");
  CHECK_STATUS(mtc_debug_copy(d->ordinal, stream, buf + 8, buf, 16),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "overlap");
  CHECK_STATUS(mtc_debug_copy(d->ordinal, 0, buf + 100, buf, 16),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_debug_copy(d->ordinal, stream, 0, buf, 16),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_debug_fill(99, stream, buf, 16, 1, 0), MTC_ERR_NO_DEVICE);
  CHECK_CONTAINS(mtc_last_error(), "cuda:99");
  CHECK_STATUS(mtc_debug_copy(-1, stream, buf + 100, buf, 16),
               MTC_ERR_NO_DEVICE);
  CHECK_EQ_U64(launches(), before);

  if (is_fake) {
    /* Driver refusals come back as MTC_ERR_CUDA naming the error. (On a
     * GPU these would fault the context, so only here.) */
    uint8_t pageable[64];
    CHECK_STATUS(mtc_debug_fill(d->ordinal, stream,
                                (uint64_t)(uintptr_t)pageable, 64, 1, 0),
                 MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_CONTAINS(mtc_last_error(), "mtc_debug_fill");
    CHECK_STATUS(mtc_debug_copy(d->ordinal, stream, buf, buf + SIZE - 8, 64),
                 MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    push(d);
    CUstream dead;
    CU_OK(cu->cuStreamCreate(&dead, CU_STREAM_NON_BLOCKING));
    CU_OK(cu->cuStreamDestroy_v2(dead));
    pop();
    CHECK_STATUS(mtc_debug_fill(d->ordinal, (uint64_t)(uintptr_t)dead, buf,
                                16, 1, 0),
                 MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_INVALID_HANDLE");
    check_no_context_left();
    /* Through the segment kernel: a destination that runs past its block. */
    push(d);
    mtc_segment *table = pinned_alloc(sizeof *table);
    table[0] = (mtc_segment){buf, buf + SIZE - 10, 20};
    CHECK_STATUS(mtc_kernels_copy_segments(d, s, table, 1), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "cuLaunchKernel(mtc_copy_segments)");
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    CU_OK(cu->cuMemFreeHost(table));
    pop();
  }

  push(d);
  CU_OK(cu->cuEventDestroy_v2(event));
  CU_OK(cu->cuMemFreeHost(pinned));
  CU_OK(cu->cuMemFree_v2(buf));
  CU_OK(cu->cuMemFree_v2(other));
  pop();
  free(want);
  free(got);
}

/* ------------------------------------------------------ two devices: peers */

/* Segments whose source lies on another device: the emulated driver refuses
 * them until peer access is on (a GPU would fault); then they copy. */
static void test_peer_segments(mtc_device *d0, mtc_device *d1, CUstream s) {
  if (!is_fake) {
    int can = 0;
    CU_OK(cu->cuDeviceCanAccessPeer(&can, d0->handle, d1->handle));
    if (!can) {
      printf("note: cuda:%d cannot access cuda:%d; peer segments skipped\n",
             d0->ordinal, d1->ordinal);
      return;
    }
  }
  enum { SIZE = 100000 };
  uint8_t *data = malloc(SIZE), *got = malloc(SIZE);
  for (int i = 0; i < SIZE; i++) data[i] = (uint8_t)next_u64();
  push(d1);
  CUstream s1;
  CU_OK(cu->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr remote = dev_alloc(SIZE);
  to_device(remote, data, SIZE, s1);
  pop();
  push(d0);
  CUdeviceptr local = dev_alloc(SIZE);
  mtc_segment *table = pinned_alloc(2 * sizeof *table);
  table[0] = (mtc_segment){remote, local, 5000};
  table[1] = (mtc_segment){remote + 5001, local + 5003, SIZE - 5003};
  if (is_fake) {
    CHECK_STATUS(mtc_kernels_copy_segments(d0, s, table, 2), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
  }
  CUresult r = cu->cuCtxEnablePeerAccess(d1->context, 0);
  CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  if (is_fake) {
    CHECK(cu->cuCtxEnablePeerAccess(d1->context, 0) ==
          CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  }
  CHECK_OK(mtc_kernels_copy_segments(d0, s, table, 2));
  CU_OK(cu->cuStreamSynchronize(s));
  to_host(got, local, SIZE, s);
  same_bytes("peer segment 0", got, data, 5000);
  same_bytes("peer segment 1", got + 5003, data + 5001, SIZE - 5003);
  CU_OK(cu->cuMemFreeHost(table));
  CU_OK(cu->cuMemFree_v2(local));
  pop();
  push(d1);
  CU_OK(cu->cuMemFree_v2(remote));
  CU_OK(cu->cuStreamDestroy_v2(s1));
  pop();
  free(data);
  free(got);
}

/* A module that fails to load (no code for the GPU): unavailable, with the
 * driver's error in the message, and the probe leaves the thread's last
 * error alone. Emulated driver only (it can be told to fail). */
static void test_module_load_failure(mtc_device *d1) {
  fake.fail_module_loads(209); /* CUDA_ERROR_NO_BINARY_FOR_GPU */
  mtc_error_set(MTC_ERR_INVALID_STATE, "an earlier failure");
  CHECK(!mtc_kernels_available(d1));
  CHECK_CONTAINS(mtc_last_error(), "an earlier failure");
  fake.fail_module_loads(0);
  /* The outcome is kept: loads are tried once per device. */
  CHECK(!mtc_kernels_available(d1));
  push(d1);
  mtc_segment *table = pinned_alloc(sizeof *table);
  CUdeviceptr p = dev_alloc(64);
  table[0] = (mtc_segment){p, p + 32, 16};
  CHECK_STATUS(mtc_kernels_copy_segments(d1, NULL, table, 1),
               MTC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  CHECK_CONTAINS(mtc_last_error(), "cuda:1");
  CUstream s;
  CU_OK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  pop();
  CHECK_STATUS(mtc_debug_fill(1, (uint64_t)(uintptr_t)s, p, 16, 1, 0),
               MTC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(mtc_last_error(), "cuModuleLoadData");
  check_no_context_left();
  push(d1);
  CU_OK(cu->cuStreamDestroy_v2(s));
  CU_OK(cu->cuMemFree_v2(p));
  CU_OK(cu->cuMemFreeHost(table));
  pop();
}

/* Many threads probing a fresh device at once: one module, one answer. */
struct probe {
  mtc_device *device;
  int available;
};

static void *probe_main(void *arg) {
  struct probe *p = arg;
  p->available = mtc_kernels_available(p->device);
  return NULL;
}

static void test_concurrent_load(mtc_device *d) {
  enum { THREADS = 8 };
  int modules_before = fake.live_modules ? fake.live_modules() : 0;
  pthread_t threads[THREADS];
  struct probe probes[THREADS];
  for (int i = 0; i < THREADS; i++) {
    probes[i] = (struct probe){d, -1};
    CHECK(pthread_create(&threads[i], NULL, probe_main, &probes[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < THREADS; i++) CHECK(probes[i].available == 1);
  if (fake.live_modules) CHECK(fake.live_modules() == modules_before + 1);
}

/* --------------------------------------------------------- timing (GPU) */

/* Informational: one gather of the example batch's 528 leaves (153,628
 * bytes) to pinned memory by the kernel, against one cuMemcpyDtoHAsync per
 * leaf; medians of launch + synchronize. */
static void report_gather_timing(mtc_device *d, CUstream s) {
  /* Per-sample tensor sizes of the design's example batch, configs A-D. */
  static const int visible[4][6] = {{30, 20, 40, 10, 50, 20},
                                    {60, 40, 30, 70, 20, 50},
                                    {10, 20, 10, 30, 20, 10},
                                    {80, 50, 60, 40, 70, 30}};
  static const int gt[4] = {60, 100, 45, 120};
  uint64_t sizes[528];
  uint32_t n = 0;
  for (int sample = 0; sample < 16; sample++) {
    int c = sample / 4;
    for (int cam = 0; cam < 6; cam++) {
      uint64_t v = (uint64_t)visible[c][cam];
      sizes[n++] = v * 16; /* bounding_boxes */
      sizes[n++] = v * 8;  /* class_ids */
      sizes[n++] = v;      /* active */
      sizes[n++] = v * 4;  /* depths */
      sizes[n++] = 48;     /* proj_mat */
    }
    sizes[n++] = (uint64_t)gt[c] * 28;
    sizes[n++] = (uint64_t)gt[c] * 8;
    sizes[n++] = (uint64_t)gt[c];
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += sizes[i];
  push(d);
  CUdeviceptr src = dev_alloc(n * 4096);
  uint8_t *dst = pinned_alloc(total + 16 * n);
  mtc_segment *table = pinned_alloc(n * sizeof *table);
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    table[i] = (mtc_segment){src + (uint64_t)i * 4096,
                             (uint64_t)(uintptr_t)dst + off, sizes[i]};
    off += (sizes[i] + 15) / 16 * 16;
  }
  enum { REPS = 101 };
  double kernel_ms[REPS], copies_ms[REPS];
  for (int r = 0; r < REPS; r++) {
    double t = now_ms();
    mtc_kernels_copy_segments(d, s, table, n);
    cu->cuStreamSynchronize(s);
    kernel_ms[r] = now_ms() - t;
    t = now_ms();
    for (uint32_t i = 0; i < n; i++) {
      cu->cuMemcpyDtoHAsync_v2((void *)(uintptr_t)table[i].dst, table[i].src,
                               sizes[i], s);
    }
    cu->cuStreamSynchronize(s);
    copies_ms[r] = now_ms() - t;
  }
  for (int i = 1; i < REPS; i++) { /* insertion sorts */
    for (int j = i; j > 0 && kernel_ms[j] < kernel_ms[j - 1]; j--) {
      double t = kernel_ms[j];
      kernel_ms[j] = kernel_ms[j - 1];
      kernel_ms[j - 1] = t;
    }
    for (int j = i; j > 0 && copies_ms[j] < copies_ms[j - 1]; j--) {
      double t = copies_ms[j];
      copies_ms[j] = copies_ms[j - 1];
      copies_ms[j - 1] = t;
    }
  }
  printf("timing: example batch (%u leaves, %llu bytes) to pinned memory: "
         "gather kernel %.1f us, per-leaf cuMemcpyDtoHAsync %.1f us "
         "(medians of %d, launch + synchronize)\n",
         n, (unsigned long long)total, kernel_ms[REPS / 2] * 1e3,
         copies_ms[REPS / 2] * 1e3, REPS);

  /* Bandwidth of one large device-to-device segment. */
  uint64_t big = 256u << 20;
  CUdeviceptr a = dev_alloc(big), b = dev_alloc(big);
  table[0] = (mtc_segment){a, b, big};
  mtc_kernels_copy_segments(d, s, table, 1); /* warm-up */
  cu->cuStreamSynchronize(s);
  double t = now_ms();
  for (int r = 0; r < 10; r++) mtc_kernels_copy_segments(d, s, table, 1);
  cu->cuStreamSynchronize(s);
  double ms = (now_ms() - t) / 10;
  printf("timing: one 256 MiB device-to-device segment: %.3f ms, %.0f GB/s "
         "(read + write counted once)\n",
         ms, (double)big / ms / 1e6);
  CU_OK(cu->cuMemFree_v2(a));
  CU_OK(cu->cuMemFree_v2(b));
  CU_OK(cu->cuMemFreeHost(table));
  CU_OK(cu->cuMemFreeHost(dst));
  CU_OK(cu->cuMemFree_v2(src));
  pop();
}

/* ------------------------------------------------------ without kernels */

/* A build without kernels, or a driver without the module calls: nothing
 * runs and every call says why. */
static void test_unavailable(mtc_device *d, const char *why) {
  CHECK(!mtc_kernels_available(d));
  push(d);
  mtc_segment *table = pinned_alloc(sizeof *table);
  CUdeviceptr p = dev_alloc(64);
  table[0] = (mtc_segment){p, p + 32, 16};
  CUstream s;
  CU_OK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK_STATUS(mtc_kernels_copy_segments(d, s, table, 1), MTC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(mtc_last_error(), why);
  /* Nothing to copy needs no kernel. */
  CHECK_OK(mtc_kernels_copy_segments(d, s, table, 0));
  pop();
  uint64_t stream = (uint64_t)(uintptr_t)s;
  CHECK_STATUS(mtc_debug_fill(d->ordinal, stream, p, 16, 1, 0),
               MTC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(mtc_last_error(), why);
  CHECK_STATUS(mtc_debug_copy(d->ordinal, stream, p + 32, p, 16),
               MTC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(mtc_last_error(), why);
  check_no_context_left();
  push(d);
  CU_OK(cu->cuStreamDestroy_v2(s));
  CU_OK(cu->cuMemFree_v2(p));
  CU_OK(cu->cuMemFreeHost(table));
  pop();
  CHECK_EQ_U64(launches(), 0);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  const char *mode = argc > 2 ? argv[2] : "kernels";
  if (argc > 1) {
    /* Before libmtc's first call, which reads MTC_CUDA_DRIVER once. */
    setenv("MTC_CUDA_DRIVER", argv[1], 1);
    setenv("FAKE_CUDA_DEVICE_COUNT", "3", 0);
    setenv("FAKE_CUDA_QUIET", "1", 0);
    load_fake(argv[1]);
  }
  is_fake = fake.kernel_launches != NULL;
  setvbuf(stdout, NULL, _IONBF, 0);

  if (strcmp(mode, "none") == 0) {
    /* The build has no kernels: that much needs no driver at all. */
    CHECK(mtc_has_kernels() == 0);
    CHECK_STATUS(mtc_debug_fill(0, 0, 0, 0, 0, 0), MTC_ERR_UNSUPPORTED);
    CHECK_CONTAINS(mtc_last_error(), "without its CUDA kernels");
  } else {
    CHECK(mtc_has_kernels() == 1);
  }

  mtc_status status = mtc_cuda_device_count(&device_count);
  if (status != MTC_OK || device_count == 0) {
    if (is_fake) {
      CHECK(0 && "the emulated driver must load");
      return check_summary("test_kernels");
    }
    printf("test_kernels: SKIPPED, no CUDA device (%s)\n",
           status != MTC_OK ? mtc_last_error() : "0 devices");
    return 0;
  }
  CHECK_OK(mtc_cuda_load(&cu));
  mtc_device *d0;
  CHECK_OK(mtc_device_get(0, &d0));
  if (cu == NULL || check_failures) return check_summary("test_kernels");

  if (strcmp(mode, "none") == 0) {
    test_unavailable(d0, "without its CUDA kernels");
    return check_summary("test_kernels (built without kernels)");
  }
  if (strcmp(mode, "no-module-api") == 0) {
    test_unavailable(d0, "lacks cuModuleLoadData");
    return check_summary("test_kernels (driver without module calls)");
  }

#ifdef MTC_TEST_STUB_KERNEL_IMAGE
  if (!is_fake) {
    printf("test_kernels: SKIPPED, this build embeds a stand-in image, not "
           "the kernels (nvcc was not found at build time)\n");
    return 0;
  }
#endif

  printf("test_kernels: %s driver, %d device%s\n",
         is_fake ? "emulated" : "real", device_count,
         device_count == 1 ? "" : "s");
  CHECK(mtc_kernels_available(d0));
  if (!mtc_kernels_available(d0)) {
    push(d0);
    mtc_segment dummy = {0, 0, 1};
    mtc_kernels_copy_segments(d0, NULL, &dummy, 1);
    pop();
    printf("kernels unavailable: %s\n", mtc_last_error());
    return check_summary("test_kernels");
  }
  push(d0);
  CUstream s;
  CU_OK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  pop();

  test_segment_copies(d0, s);
  printf("ok segment copies\n");
  test_debug_kernels(d0, s);
  printf("ok debug fill and copy\n");
  /* MTC_TEST_QUICK=1: fewer random rounds and no timing (for slow runs,
   * such as under compute-sanitizer). */
  const char *quick_env = getenv("MTC_TEST_QUICK");
  int quick = quick_env != NULL && quick_env[0] != '\0' && strcmp(quick_env, "0") != 0;
  if (!is_fake) {
    test_random_segments(d0, s, quick ? 4 : 40);
    printf("ok random segment sets\n");
  }

  if (device_count >= 2) {
    mtc_device *d1;
    CHECK_OK(mtc_device_get(1, &d1));
    if (is_fake) {
      test_module_load_failure(d1);
      printf("ok module load failure\n");
    }
    test_peer_segments(d0, d1, s);
    printf("ok peer segments\n");
  }
  if (is_fake && device_count >= 3) {
    mtc_device *d2;
    CHECK_OK(mtc_device_get(2, &d2));
    test_concurrent_load(d2);
    printf("ok concurrent first use\n");
    /* Devices 0 and 2 hold a module; device 1's load failed. */
    CHECK(fake.live_modules() == 2);
  }
  if (!is_fake && !quick) report_gather_timing(d0, s);

  push(d0);
  CU_OK(cu->cuStreamDestroy_v2(s));
  pop();
  check_no_context_left();
  return check_summary(is_fake ? "test_kernels (emulated driver)"
                               : "test_kernels (real GPU)");
}
