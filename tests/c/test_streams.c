/* test_streams.c — streams, events, plan ordering against callers' streams,
 * completion events, plan stats, the gather paths and peer access, against
 * the emulated driver (libfakecuda.so, path in argv[1] or MTC_CUDA_DRIVER)
 * with two devices.
 *
 * The emulated driver's time model makes ordering observable: work "takes"
 * its delay on its stream, cuStreamWaitEvent moves the waiting stream's busy
 * time, and events stay NOT_READY until their stream's busy time passes.
 * Callers' streams are made busy with a slow copy queued on them through the
 * emulated driver itself. Links the static library, so it can read
 * libmtc's internal counters too.
 *
 * Given libcuda.so.1 instead, it runs against real GPUs: callers' streams
 * are made busy with mtc_debug_fill's spinning kernel (ordering checks are
 * skipped in a build without kernels), device results are read back through
 * libmtc, and the checks that need the emulation (its counters, modelled
 * copy delays, invalid handles) are skipped; two-device checks need two
 * GPUs. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"
#include "cuda/device.h"
#include "cuda/event.h"
#include "mtc.h"

/* The emulated driver's exports (NULL when absent), typed exactly as
 * fake_cuda.c defines them: a call through a pointer of another type is
 * undefined, and -fsanitize=function traps on it. */
static struct {
  void (*set_copy_delay_us)(unsigned long long us);
  unsigned long long (*copy_count)(void);
  unsigned long long (*kernel_launches)(void);
  int (*live_streams)(void);
  int (*live_events)(void);
  int (*live_device_allocations)(void);
  int (*live_host_allocations)(void);
  CUresult (*ctx_get_current)(CUcontext *ctx);
  CUresult (*primary_retain)(CUcontext *ctx, CUdevice device);
  CUresult (*primary_release)(CUdevice device);
  CUresult (*ctx_push)(CUcontext ctx);
  CUresult (*ctx_pop)(CUcontext *ctx);
  CUresult (*memcpy_dtod)(unsigned long long dst, unsigned long long src,
                          size_t bytes, CUstream stream);
} fake;

static void load_fake(const char *path) {
  void *handle = fake_open(path);
  if (handle == NULL) return;
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  FAKE_SYM(handle, fake.copy_count, "fake_cuda_copy_count");
  FAKE_SYM(handle, fake.kernel_launches, "fake_cuda_kernel_launches");
  FAKE_SYM(handle, fake.live_streams, "fake_cuda_live_streams");
  FAKE_SYM(handle, fake.live_events, "fake_cuda_live_events");
  FAKE_SYM(handle, fake.live_device_allocations, "fake_cuda_live_device_allocations");
  FAKE_SYM(handle, fake.live_host_allocations, "fake_cuda_live_host_allocations");
  FAKE_SYM(handle, fake.ctx_get_current, "cuCtxGetCurrent");
  FAKE_SYM(handle, fake.primary_retain, "cuDevicePrimaryCtxRetain");
  FAKE_SYM(handle, fake.primary_release, "cuDevicePrimaryCtxRelease_v2");
  FAKE_SYM(handle, fake.ctx_push, "cuCtxPushCurrent_v2");
  FAKE_SYM(handle, fake.ctx_pop, "cuCtxPopCurrent_v2");
  FAKE_SYM(handle, fake.memcpy_dtod, "cuMemcpyDtoDAsync_v2");
}

/* Set in main. */
static int is_fake;
static int device_count;
static int can_busy; /* make_busy works: emulated, or kernels built in */

static void set_delay(unsigned long long us) {
  if (fake.set_copy_delay_us) fake.set_copy_delay_us(us);
}

static unsigned long long copies(void) {
  return fake.copy_count ? fake.copy_count() : 0;
}

static unsigned long long launches(void) {
  return fake.kernel_launches ? fake.kernel_launches() : 0;
}

/* The caller's thread must have no current context after libmtc calls. */
static void check_no_context_left(void) {
  if (fake.ctx_get_current == NULL) return;
  CUcontext ctx = (CUcontext)1;
  CHECK(fake.ctx_get_current(&ctx) == 0);
  CHECK(ctx == NULL);
}

static mtc_options options_bg(uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  return o;
}

static mtc_plan_stats plan_stats(const mtc_plan *plan) {
  mtc_plan_stats s;
  memset(&s, 0xEE, sizeof s);
  s.struct_size = sizeof s;
  CHECK_OK(mtc_plan_get_stats(plan, &s));
  return s;
}

/* ------------------------------------------------------------ device memory
 * Per device: one 1 MiB block of device memory (copied from the host by
 * libmtc) the tests read leaves from and queue slow work in. */

#define SCRATCH_BYTES ((uint64_t)1 << 20)

static struct {
  mtc_block *block;
  uint64_t address;
  CUcontext context; /* the emulated driver's primary context, retained here */
} scratch[2];

static uint8_t scratch_pattern(int device, uint64_t i) {
  return (uint8_t)(i * 7 + (uint64_t)device * 101 + (i >> 8));
}

static void setup_scratch(void) {
  uint8_t *data = malloc(SCRATCH_BYTES);
  for (int d = 0; d < device_count && d < 2; d++) {
    for (uint64_t i = 0; i < SCRATCH_BYTES; i++) data[i] = scratch_pattern(d, i);
    mtc_leaf leaf = make_leaf(host_address(data), SCRATCH_BYTES, 1,
                              MTC_DEVICE_CPU);
    mtc_options o = options_bg(0);
    mtc_plan *plan;
    CHECK_OK(mtc_plan_create(d, &o, &plan));
    CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
    CHECK_OK(mtc_plan_submit(plan));
    CHECK_OK(mtc_plan_wait(plan));
    mtc_leaf_result r;
    CHECK_OK(mtc_plan_results(plan, 0, 1, &r));
    scratch[d].block = r.block;
    scratch[d].address = r.address;
    mtc_block_retain(r.block);
    mtc_plan_release(plan);
    if (is_fake) CHECK(fake.primary_retain(&scratch[d].context, d) == 0);
  }
  free(data);
}

static void teardown_scratch(void) {
  for (int d = 0; d < device_count && d < 2; d++) {
    mtc_block_release(scratch[d].block);
    if (is_fake) CHECK(fake.primary_release(d) == 0);
  }
}

/* Queues work on `stream` (of device) that takes `us` microseconds: a copy
 * inside the device's scratch block through the emulated driver, or a
 * spinning fill kernel there on a GPU. */
static void make_busy(int device, uint64_t stream, unsigned long long us) {
  uint64_t half = SCRATCH_BYTES / 2;
  if (!is_fake) {
    CHECK_OK(mtc_debug_fill(device, stream, scratch[device].address + half,
                            4096, 0x5A, (uint32_t)us));
    return;
  }
  set_delay(us);
  CHECK(fake.ctx_push(scratch[device].context) == 0);
  CHECK(fake.memcpy_dtod(scratch[device].address + half,
                         scratch[device].address + half + 4096, 4096,
                         (CUstream)(uintptr_t)stream) == 0);
  CUcontext popped;
  CHECK(fake.ctx_pop(&popped) == 0);
  set_delay(0);
}

/* A leaf of `bytes` bytes at `offset` in device's scratch block (the first
 * half, which make_busy never writes). */
static mtc_leaf scratch_leaf(int device, uint64_t offset, uint64_t bytes) {
  return make_leaf(scratch[device].address + offset, bytes, 4, device);
}

/* The copy (at address, on result_device) of a leaf made by scratch_leaf
 * must hold the scratch pattern. Device memory is host memory in the
 * emulation; on a GPU it is read back through a plan. */
static int holds_scratch(uint64_t address, int result_device, int device,
                         uint64_t offset, uint64_t bytes) {
  mtc_plan *back = NULL;
  if (result_device != MTC_DEVICE_CPU && !is_fake) {
    mtc_leaf leaf = make_leaf(address, bytes, 1, result_device);
    mtc_options o = MTC_OPTIONS_INIT;
    mtc_leaf_result r;
    if (mtc_plan_create(MTC_DEVICE_CPU, &o, &back) != MTC_OK ||
        mtc_plan_add_leaf(back, &leaf, NULL) != MTC_OK ||
        mtc_plan_submit(back) != MTC_OK || mtc_plan_wait(back) != MTC_OK ||
        mtc_plan_results(back, 0, 1, &r) != MTC_OK) {
      mtc_plan_release(back);
      return 0;
    }
    address = r.address;
  }
  const uint8_t *p = (const uint8_t *)(uintptr_t)address;
  int same = 1;
  for (uint64_t i = 0; i < bytes && same; i++) {
    same = p[i] == scratch_pattern(device, offset + i);
  }
  mtc_plan_release(back);
  return same;
}

/* ------------------------------------------------------------ streams */

static void test_streams(void) {
  int streams_before = is_fake ? fake.live_streams() : 0;
  int other = device_count - 1; /* 1, or 0 on a machine with one GPU */
  uint64_t s0 = 0, s1 = 0;
  CHECK_OK(mtc_stream_create(0, &s0));
  CHECK_OK(mtc_stream_create(other, &s1));
  CHECK(s0 != 0 && s1 != 0 && s0 != s1);
  if (is_fake) CHECK(fake.live_streams() == streams_before + 2);
  check_no_context_left();

  /* Synchronize waits for the work queued so far. */
  if (can_busy) {
    make_busy(0, s0, 150 * 1000);
    double start = now_ms();
    CHECK_OK(mtc_stream_synchronize(0, s0));
    CHECK(now_ms() - start >= 100);
    start = now_ms();
    CHECK_OK(mtc_stream_synchronize(other, s1));
    CHECK(now_ms() - start < 100);
  }
  check_no_context_left();

  /* Errors. */
  uint64_t out = 99;
  CHECK_STATUS(mtc_stream_create(0, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "out_stream must not be NULL");
  CHECK_STATUS(mtc_stream_create(70, &out), MTC_ERR_NO_DEVICE);
  CHECK_CONTAINS(mtc_last_error(), "cuda:70 requested but this machine has");
  CHECK(out == 0);
  CHECK_STATUS(mtc_stream_create(-1, &out), MTC_ERR_NO_DEVICE);
  CHECK_STATUS(mtc_stream_synchronize(0, 0), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "stream is 0");
  CHECK_STATUS(mtc_stream_synchronize(70, s0), MTC_ERR_NO_DEVICE);
  mtc_stream_destroy(0, 0); /* ignored */

  mtc_stream_destroy(0, s0);
  mtc_stream_destroy(other, s1);
  if (is_fake) {
    CHECK(fake.live_streams() == streams_before);
    /* A destroyed stream is an error the driver names. */
    CHECK_STATUS(mtc_stream_synchronize(0, s0), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "cuStreamSynchronize failed: "
                                     "CUDA_ERROR_INVALID_HANDLE");
  }
  check_no_context_left();
}

static void test_events(void) {
  uint64_t live_before = mtc_event_live_count();
  uint64_t s0;
  CHECK_OK(mtc_stream_create(0, &s0));
  if (can_busy) make_busy(0, s0, 150 * 1000);
  mtc_event *e = NULL;
  CHECK_OK(mtc_event_record(0, s0, &e));
  CHECK(e != NULL);
  CHECK(mtc_event_handle(e) != 0);
  CHECK(mtc_event_handle(NULL) == 0);
  CHECK_EQ_U64(mtc_event_live_count(), live_before + 1);
  double start = now_ms();
  if (can_busy) CHECK_STATUS(mtc_event_query(e), MTC_IN_PROGRESS);
  CHECK_OK(mtc_event_synchronize(e));
  if (can_busy) CHECK(now_ms() - start >= 100);
  CHECK_OK(mtc_event_query(e));

  /* References: the event lives until the last release. */
  mtc_event_retain(e);
  mtc_event_release(e);
  CHECK_EQ_U64(mtc_event_live_count(), live_before + 1);
  CHECK_OK(mtc_event_query(e));
  mtc_event_release(e);
  CHECK_EQ_U64(mtc_event_live_count(), live_before);
  mtc_event_retain(NULL);
  mtc_event_release(NULL);

  /* An event on an idle stream is complete at once. */
  CHECK_OK(mtc_event_record(0, s0, &e));
  CHECK_OK(mtc_event_query(e));
  mtc_event_release(e);

  /* Errors. */
  e = (mtc_event *)1;
  CHECK_STATUS(mtc_event_record(0, 0, &e), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "mtc_event_record: stream is 0");
  CHECK(e == NULL);
  CHECK_STATUS(mtc_event_record(0, s0, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_event_record(90, s0, &e), MTC_ERR_NO_DEVICE);
  if (is_fake) {
    /* A stream of device 0 recorded as if it were device 1's. */
    CHECK_STATUS(mtc_event_record(1, s0, &e), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_last_error(), "cuEventRecord failed: "
                                     "CUDA_ERROR_INVALID_HANDLE");
    CHECK(e == NULL);
  }
  CHECK_STATUS(mtc_event_query(NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_event_synchronize(NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_EQ_U64(mtc_event_live_count(), live_before);
  mtc_stream_destroy(0, s0);
  check_no_context_left();
}

/* A stream of device 1 waits on an event of device 0. */
static void test_wait_event_across_devices(void) {
  if (device_count < 2 || !can_busy) {
    printf("test_wait_event_across_devices skipped: needs 2 devices and a "
           "way to make a stream busy\n");
    return;
  }
  uint64_t s0, s1;
  CHECK_OK(mtc_stream_create(0, &s0));
  CHECK_OK(mtc_stream_create(1, &s1));
  make_busy(0, s0, 200 * 1000);
  mtc_event *on0, *on1;
  CHECK_OK(mtc_event_record(0, s0, &on0));
  CHECK_OK(mtc_stream_wait_event(1, s1, on0));
  CHECK_OK(mtc_event_record(1, s1, &on1));
  CHECK_STATUS(mtc_event_query(on1), MTC_IN_PROGRESS);
  double start = now_ms();
  CHECK_OK(mtc_event_synchronize(on1));
  CHECK(now_ms() - start >= 120);
  CHECK_OK(mtc_event_query(on0));

  CHECK_STATUS(mtc_stream_wait_event(1, 0, on0), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "stream is 0");
  CHECK_STATUS(mtc_stream_wait_event(1, s1, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "event must not be NULL");
  CHECK_STATUS(mtc_stream_wait_event(40, s1, on0), MTC_ERR_NO_DEVICE);
  mtc_event_release(on0);
  mtc_event_release(on1);
  mtc_stream_destroy(0, s0);
  mtc_stream_destroy(1, s1);
  check_no_context_left();
}

/* ------------------------------------------------------------ ordering */

/* A copy from device 0 waits for the work queued on the caller's stream of
 * device 0 before submit, when (and only when) the plan is told about it. */
static void test_source_stream_orders_copy(int32_t target,
                                           uint32_t background) {
  if (target >= device_count || !can_busy) {
    printf("test_source_stream_orders_copy to %d skipped: needs that device "
           "and a way to make a stream busy\n", target);
    return;
  }
  uint64_t s0;
  CHECK_OK(mtc_stream_create(0, &s0));
  mtc_leaf leaves[3] = {scratch_leaf(0, 0, 1000), scratch_leaf(0, 4096, 2000),
                        scratch_leaf(0, 65536, 300000)};
  mtc_options o = options_bg(background);

  for (int told = 0; told < 2; told++) {
    make_busy(0, s0, 300 * 1000);
    mtc_event *user_work;
    CHECK_OK(mtc_event_record(0, s0, &user_work));
    mtc_plan *plan;
    CHECK_OK(mtc_plan_create(target, &o, &plan));
    CHECK_OK(mtc_plan_add_leaves(plan, leaves, 3));
    if (told) CHECK_OK(mtc_plan_set_stream(plan, 0, s0));
    double start = now_ms();
    CHECK_OK(mtc_plan_submit(plan));
    mtc_event *done = NULL;
    CHECK_OK(mtc_plan_completion_event(plan, &done));
    CHECK(done != NULL);
    if (told) {
      CHECK_STATUS(mtc_plan_poll(plan), MTC_IN_PROGRESS);
      CHECK_STATUS(mtc_event_query(done), MTC_IN_PROGRESS);
    }
    CHECK_OK(mtc_plan_wait(plan));
    double took = now_ms() - start;
    if (told) {
      /* Not before the caller's work: the completion follows it. */
      CHECK(took >= 200);
      CHECK_OK(mtc_event_query(user_work));
    } else {
      /* Not told: the copy does not wait for unrelated work. */
      CHECK(took < 250); /* waiting for it would take 300 ms */
      CHECK_STATUS(mtc_event_query(user_work), MTC_IN_PROGRESS);
    }
    CHECK_OK(mtc_event_query(done));
    mtc_leaf_result r[3];
    CHECK_OK(mtc_plan_results(plan, 0, 3, r));
    for (int i = 0; i < 3; i++) {
      CHECK(r[i].device == target);
      CHECK(holds_scratch(r[i].address, r[i].device, 0,
                          leaves[i].address - scratch[0].address,
                          leaves[i].bytes));
    }
    mtc_plan_release(plan);
    mtc_event_synchronize(user_work);
    mtc_event_release(user_work);
    /* The completion event outlives its plan. */
    CHECK_OK(mtc_event_query(done));
    mtc_event_release(done);
  }
  mtc_stream_destroy(0, s0);
  check_no_context_left();
}

/* With a caller's stream on the target: the stream waits on the copy before
 * submit returns (whatever use_background_thread says), and wait returns
 * when the copy is done even though later, longer work sits on that
 * stream. */
static void test_target_stream(uint32_t background) {
  if (!can_busy) {
    printf("test_target_stream skipped: no way to make a stream busy\n");
    return;
  }
  int dev = device_count - 1; /* 1, or 0 with one GPU */
  uint64_t s1;
  CHECK_OK(mtc_stream_create(dev, &s1));
  enum { N = 10 };
  uint32_t data[N][64];
  mtc_leaf leaves[N];
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < 64; j++) data[i][j] = (uint32_t)(i * 1000 + j);
    leaves[i] = make_leaf(host_address(data[i]), sizeof data[i], 4,
                          MTC_DEVICE_CPU);
  }
  mtc_options o = options_bg(background);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(dev, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
  CHECK_OK(mtc_plan_set_stream(plan, dev, s1));
  set_delay(100 * 1000); /* the copy takes 100 ms (emulated only) */
  double start = now_ms();
  CHECK_OK(mtc_plan_submit(plan));
  set_delay(0);
  /* Enqueued already: the caller's stream now waits on the copy. */
  mtc_event *after_copy;
  CHECK_OK(mtc_event_record(dev, s1, &after_copy));
  if (is_fake) CHECK_STATUS(mtc_event_query(after_copy), MTC_IN_PROGRESS);
  /* Later, longer work of the caller's. */
  make_busy(dev, s1, 600 * 1000);
  mtc_event *after_work;
  CHECK_OK(mtc_event_record(dev, s1, &after_work));

  CHECK_OK(mtc_plan_wait(plan));
  double took = now_ms() - start;
  if (is_fake) CHECK(took >= 70);
  CHECK(took < 650); /* waiting for the later work too would take 700 ms and more */
  CHECK_STATUS(mtc_event_query(after_work), MTC_IN_PROGRESS);
  /* The stream moved past the copy when the copy completed. */
  sleep_ms(5);
  CHECK_OK(mtc_event_query(after_copy));
  mtc_leaf_result r[N];
  CHECK_OK(mtc_plan_results(plan, 0, N, r));
  for (int i = 0; i < N; i++) {
    CHECK(r[i].device == dev);
    if (is_fake) {
      CHECK(memcmp((void *)(uintptr_t)r[i].address, data[i], sizeof data[i]) == 0);
    }
  }
  mtc_event *done;
  CHECK_OK(mtc_plan_completion_event(plan, &done));
  CHECK_OK(mtc_event_query(done));
  mtc_event_release(done);
  mtc_plan_release(plan);
  mtc_event_release(after_copy);
  CHECK_OK(mtc_event_synchronize(after_work));
  mtc_event_release(after_work);
  mtc_stream_destroy(dev, s1);
  check_no_context_left();
}

/* Streams on the source and on the target at once, device to device. */
static void test_both_streams(uint32_t background) {
  if (device_count < 2 || !can_busy) {
    printf("test_both_streams skipped: needs 2 devices and a way to make a "
           "stream busy\n");
    return;
  }
  uint64_t s0, s1;
  CHECK_OK(mtc_stream_create(0, &s0));
  CHECK_OK(mtc_stream_create(1, &s1));
  mtc_leaf leaves[4];
  for (int i = 0; i < 4; i++) leaves[i] = scratch_leaf(0, (uint64_t)i * 8192, 5000);
  mtc_options o = options_bg(background);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(1, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, 4));
  CHECK_OK(mtc_plan_set_stream(plan, 0, s0));
  CHECK_OK(mtc_plan_set_stream(plan, 1, s1));
  make_busy(0, s0, 250 * 1000);
  double start = now_ms();
  CHECK_OK(mtc_plan_submit(plan));
  /* The target's stream now waits, through the copy, on the source's. */
  mtc_event *on1;
  CHECK_OK(mtc_event_record(1, s1, &on1));
  CHECK_STATUS(mtc_event_query(on1), MTC_IN_PROGRESS);
  CHECK_OK(mtc_event_synchronize(on1));
  CHECK(now_ms() - start >= 180);
  CHECK_OK(mtc_plan_poll(plan));
  mtc_leaf_result r[4];
  CHECK_OK(mtc_plan_results(plan, 0, 4, r));
  for (int i = 0; i < 4; i++) {
    CHECK(holds_scratch(r[i].address, 1, 0, (uint64_t)i * 8192, 5000));
  }
  mtc_event_release(on1);
  mtc_plan_release(plan);
  mtc_stream_destroy(0, s0);
  mtc_stream_destroy(1, s1);
  check_no_context_left();
}

/* ------------------------------------------------------- completion events */

static void test_completion_events(void) {
  mtc_options o = options_bg(1);
  uint8_t bytes[64] = {1, 2, 3};
  mtc_leaf host = make_leaf(host_address(bytes), sizeof bytes, 1,
                            MTC_DEVICE_CPU);

  /* No device work: no event. */
  mtc_plan *plan;
  mtc_event *e = (mtc_event *)1;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &host, NULL));
  CHECK_STATUS(mtc_plan_completion_event(plan, &e), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "not submitted");
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_completion_event(plan, &e));
  CHECK(e == NULL);
  mtc_plan_release(plan);

  /* Errors. */
  CHECK_STATUS(mtc_plan_completion_event(NULL, &e), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_STATUS(mtc_plan_completion_event(plan, NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_plan_release(plan);

  mtc_leaf on0 = scratch_leaf(0, 0, 4096);
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &on0, NULL)); /* reused */
  CHECK_OK(mtc_plan_submit(plan));
  e = (mtc_event *)1;
  CHECK_OK(mtc_plan_completion_event(plan, &e));
  CHECK(e == NULL);
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);

  if (device_count < 2 || !can_busy) {
    printf("test_completion_events: two-device part skipped\n");
    return;
  }
  /* Two source devices to the host: one event covers both, even when one
   * device's copy waits long. */
  uint64_t s1;
  CHECK_OK(mtc_stream_create(1, &s1));
  mtc_leaf two[4] = {scratch_leaf(0, 0, 100), scratch_leaf(1, 0, 100),
                     scratch_leaf(0, 512, 100), scratch_leaf(1, 512, 100)};
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, two, 4));
  CHECK_OK(mtc_plan_set_stream(plan, 1, s1));
  make_busy(1, s1, 250 * 1000);
  double start = now_ms();
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_completion_event(plan, &e));
  CHECK(e != NULL);
  CHECK_STATUS(mtc_event_query(e), MTC_IN_PROGRESS);
  sleep_ms(100);
  CHECK_STATUS(mtc_event_query(e), MTC_IN_PROGRESS);
  CHECK_STATUS(mtc_plan_poll(plan), MTC_IN_PROGRESS);
  CHECK_OK(mtc_event_synchronize(e));
  CHECK(now_ms() - start >= 180);
  CHECK_OK(mtc_plan_poll(plan));
  mtc_event *again;
  CHECK_OK(mtc_plan_completion_event(plan, &again));
  CHECK(again == e);
  mtc_event_release(again);
  mtc_leaf_result r[4];
  CHECK_OK(mtc_plan_results(plan, 0, 4, r));
  for (int i = 0; i < 4; i++) {
    CHECK(holds_scratch(r[i].address, MTC_DEVICE_CPU, two[i].device,
                        two[i].address - scratch[two[i].device].address, 100));
  }
  mtc_plan_release(plan);
  CHECK_OK(mtc_event_query(e));
  mtc_event_release(e);
  mtc_stream_destroy(1, s1);
  check_no_context_left();
}

/* ------------------------------------------------------------ stats */

static void test_stats(uint32_t background) {
  /* Like the example: small host tensors of mixed dtypes to cuda:0. */
  enum { N = 10 };
  static const uint32_t elements[N] = {4, 8, 1, 4, 4, 4, 8, 1, 4, 4};
  static const uint32_t counts[N] = {120, 30, 30, 30, 84, 80, 20, 20, 20, 12};
  uint8_t *data[N];
  mtc_leaf leaves[N];
  uint64_t total = 0;
  for (int i = 0; i < N; i++) {
    uint64_t bytes = (uint64_t)elements[i] * counts[i];
    data[i] = malloc(bytes);
    for (uint64_t j = 0; j < bytes; j++) data[i][j] = (uint8_t)(i + j);
    leaves[i] = make_leaf(host_address(data[i]), bytes, elements[i],
                          MTC_DEVICE_CPU);
    total += bytes;
  }
  mtc_options o = options_bg(background);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
  mtc_plan_stats s = plan_stats(plan);
  CHECK_EQ_U64(s.struct_size, sizeof s);
  CHECK_EQ_U64(s.leaves, N);
  CHECK_EQ_U64(s.chunks, 0);
  CHECK_EQ_U64(s.copies_issued, 0);
  CHECK_EQ_U64(s.submit_ns, 0);
  unsigned long long copies_before = copies();
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  s = plan_stats(plan);
  CHECK_EQ_U64(s.leaves, N);
  CHECK_EQ_U64(s.leaves_reused, 0);
  CHECK_EQ_U64(s.leaves_packed, N);
  CHECK_EQ_U64(s.chunks, 1);
  CHECK_EQ_U64(s.blocks, 1);
  CHECK_EQ_U64(s.bytes_copied, total);
  CHECK_EQ_U64(s.copies_issued, 1);
  if (is_fake) CHECK_EQ_U64(copies() - copies_before, 1);
  CHECK_EQ_U64(s.pinned_reuses + s.pinned_allocations, 1);
  CHECK(s.submit_ns > 0);
  CHECK(s.staging_ns <= s.submit_ns);
  CHECK_EQ_U64(s.device_to_host_path, MTC_PATH_NONE);
  mtc_leaf_result r[N];
  CHECK_OK(mtc_plan_results(plan, 0, N, r));
  mtc_plan_release(plan);

  /* The same batch again: the pinned chunk comes from the pool. */
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  s = plan_stats(plan);
  CHECK_EQ_U64(s.pinned_reuses, 1);
  CHECK_EQ_U64(s.pinned_allocations, 0);
  CHECK_OK(mtc_plan_results(plan, 0, N, r));

  /* Those device leaves back to cuda:0 (reused), and host leaves too. */
  mtc_leaf back[N + 2];
  for (int i = 0; i < N; i++) {
    back[i] = make_leaf(r[i].address, leaves[i].bytes, elements[i], 0);
  }
  back[N] = leaves[0];
  back[N + 1] = make_leaf(0, 0, 1, MTC_DEVICE_CPU); /* zero bytes */
  mtc_plan *again;
  CHECK_OK(mtc_plan_create(0, &o, &again));
  CHECK_OK(mtc_plan_add_leaves(again, back, N + 2));
  CHECK_OK(mtc_plan_submit(again));
  CHECK_OK(mtc_plan_wait(again));
  s = plan_stats(again);
  CHECK_EQ_U64(s.leaves, N + 2);
  CHECK_EQ_U64(s.leaves_reused, N);
  CHECK_EQ_U64(s.leaves_packed, 1);
  CHECK_EQ_U64(s.bytes_copied, leaves[0].bytes);
  CHECK_EQ_U64(s.copies_issued, 1);
  mtc_plan_release(again);

  /* Host to host: nothing for the device to do. */
  leaves[3].row_count = 2;
  leaves[3].row_pitch = leaves[3].bytes / 2;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &again));
  CHECK_OK(mtc_plan_add_leaves(again, leaves, N));
  CHECK_OK(mtc_plan_submit(again));
  CHECK_OK(mtc_plan_wait(again));
  s = plan_stats(again);
  CHECK_EQ_U64(s.leaves_reused, N - 1);
  CHECK_EQ_U64(s.blocks, 1);
  CHECK_EQ_U64(s.copies_issued, 0);
  CHECK_EQ_U64(s.bytes_copied, leaves[3].bytes);
  mtc_plan_release(again);
  leaves[3].row_count = 0;
  leaves[3].row_pitch = 0;

  /* Errors. */
  s.struct_size = 8;
  CHECK_STATUS(mtc_plan_get_stats(plan, &s), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "struct_size is 8");
  CHECK_STATUS(mtc_plan_get_stats(NULL, &s), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_get_stats(plan, NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_plan_release(plan);
  for (int i = 0; i < N; i++) free(data[i]);
  check_no_context_left();
}

/* ------------------------------------------------------------ gather */

/* Small device leaves to the host: one gather kernel when the build has
 * kernels (pinned blocks written straight from the GPU), else one DMA per
 * leaf; large leaves keep their own DMA either way. */
static void test_device_to_host_paths(uint32_t background) {
  enum { N = 12 };
  mtc_leaf leaves[N + 1];
  for (int i = 0; i < N; i++) {
    leaves[i] = scratch_leaf(0, (uint64_t)i * 3000, 100 + (uint64_t)i * 37);
  }
  leaves[N] = scratch_leaf(0, 100000, 400000); /* above pack_threshold */
  mtc_options o = options_bg(background);
  unsigned long long copies_before = copies(), launches_before = launches();
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, N + 1));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_stats s = plan_stats(plan);
  int gathered = s.device_to_host_path == MTC_PATH_GATHER_KERNEL;
  /* The emulated driver runs the kernels whenever the build has them. */
  CHECK(gathered == (mtc_has_kernels() != 0));
  if (gathered) {
    CHECK_EQ_U64(s.copies_issued, 2);
    if (is_fake) {
      CHECK_EQ_U64(launches() - launches_before, 1);
      CHECK_EQ_U64(copies() - copies_before, 1);
    }
    /* Pinned blocks for the chunk and the large leaf, and the table. */
    CHECK_EQ_U64(s.pinned_reuses + s.pinned_allocations, 3);
  } else {
    printf("test_device_to_host_paths: no kernels in this build: per-leaf "
           "path\n");
    CHECK_EQ_U64(s.device_to_host_path, MTC_PATH_PER_LEAF);
    CHECK_EQ_U64(s.copies_issued, N + 1);
    if (is_fake) CHECK_EQ_U64(copies() - copies_before, N + 1);
    CHECK_EQ_U64(s.pinned_reuses + s.pinned_allocations, 2);
  }
  CHECK_EQ_U64(s.chunks, 1);
  CHECK_EQ_U64(s.leaves_packed, N);
  CHECK_EQ_U64(s.blocks, 2);
  mtc_leaf_result r[N + 1];
  CHECK_OK(mtc_plan_results(plan, 0, N + 1, r));
  for (int i = 0; i <= N; i++) {
    CHECK(r[i].device == MTC_DEVICE_CPU);
    CHECK(holds_scratch(r[i].address, MTC_DEVICE_CPU, 0,
                        leaves[i].address - scratch[0].address,
                        leaves[i].bytes));
  }
  CHECK(r[0].block == r[N - 1].block);
  mtc_plan_release(plan);

  /* One small leaf: never worth a kernel. */
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaves[0], NULL));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  s = plan_stats(plan);
  CHECK_EQ_U64(s.device_to_host_path, MTC_PATH_PER_LEAF);
  CHECK_EQ_U64(s.copies_issued, 1);
  mtc_plan_release(plan);
  check_no_context_left();
}

/* cuda:0 -> cuda:1 of many small leaves: one kernel on the source pushing
 * into the target's blocks when kernels and peer access allow; peer access
 * is set up once per ordered pair. */
static void test_device_to_device_paths(uint32_t background) {
  if (device_count < 2) {
    printf("test_device_to_device_paths skipped: needs 2 devices\n");
    return;
  }
  enum { N = 9 };
  mtc_leaf leaves[N];
  for (int i = 0; i < N; i++) {
    leaves[i] = scratch_leaf(0, (uint64_t)i * 5000, 64 + (uint64_t)i * 211);
  }
  mtc_options o = options_bg(background);
  for (int round = 0; round < 2; round++) {
    uint64_t setups_before = mtc_device_peer_setup_count();
    unsigned long long copies_before = copies(), launches_before = launches();
    mtc_plan *plan;
    CHECK_OK(mtc_plan_create(1, &o, &plan));
    CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
    CHECK_OK(mtc_plan_submit(plan));
    CHECK_OK(mtc_plan_wait(plan));
    mtc_plan_stats s = plan_stats(plan);
    CHECK_EQ_U64(s.device_to_host_path, MTC_PATH_NONE);
    int gathered = s.copies_issued == 1;
    if (is_fake) {
      /* Every two devices are peers in the emulation. */
      CHECK(gathered == (mtc_has_kernels() != 0));
      CHECK_EQ_U64(launches() - launches_before, gathered ? 1 : 0);
      CHECK_EQ_U64(copies() - copies_before, gathered ? 0 : N);
    } else if (round == 0) {
      printf("test_device_to_device_paths: %s\n",
             gathered ? "one gather kernel (peer access)"
                      : "one peer copy per leaf");
    }
    if (!gathered) CHECK_EQ_U64(s.copies_issued, N);
    /* Set up in the first plan of the process that needs the pair. */
    if (round == 1 || background == 1) {
      CHECK_EQ_U64(mtc_device_peer_setup_count() - setups_before, 0);
    }
    mtc_leaf_result r[N];
    CHECK_OK(mtc_plan_results(plan, 0, N, r));
    for (int i = 0; i < N; i++) {
      CHECK(r[i].device == 1);
      CHECK(r[i].flags == MTC_RESULT_PACKED);
      CHECK(holds_scratch(r[i].address, 1, 0,
                          leaves[i].address - scratch[0].address,
                          leaves[i].bytes));
    }
    mtc_plan_release(plan);
  }
  check_no_context_left();
}

static void test_peer_setup_once(void) {
  if (device_count < 2) {
    check_skip("peer setup once", "needs two devices");
    return;
  }
  /* Both directions between the two devices, gathered or per leaf, many
   * times: each ordered pair is set up once in the process, at most two. */
  mtc_options o = options_bg(0);
  for (int round = 0; round < 3; round++) {
    for (int source = 0; source < 2; source++) {
      mtc_leaf leaves[3] = {scratch_leaf(source, 0, 128),
                            scratch_leaf(source, 1024, 128),
                            scratch_leaf(source, 2048, 300000)};
      mtc_plan *plan;
      CHECK_OK(mtc_plan_create(1 - source, &o, &plan));
      CHECK_OK(mtc_plan_add_leaves(plan, leaves, 3));
      CHECK_OK(mtc_plan_submit(plan));
      CHECK_OK(mtc_plan_wait(plan));
      mtc_plan_release(plan);
    }
  }
  uint64_t setups = mtc_device_peer_setup_count();
  CHECK(setups >= 1 && setups <= 2);
  int usable = 0;
  mtc_device *d0, *d1;
  CHECK_OK(mtc_device_get(0, &d0));
  CHECK_OK(mtc_device_get(1, &d1));
  for (int i = 0; i < 2; i++) {
    CHECK_OK(mtc_device_enable_peer(d1, d0, &usable));
    if (is_fake) CHECK(usable == 1);
    CHECK_OK(mtc_device_enable_peer(d0, d1, &usable));
    if (is_fake) CHECK(usable == 1);
  }
  CHECK_OK(mtc_device_enable_peer(d0, d0, &usable));
  CHECK(usable == 1);
  CHECK_EQ_U64(mtc_device_peer_setup_count(), 2);
  check_no_context_left();
}

/* ------------------------------------------------------------ errors */

static void test_set_stream_errors(void) {
  mtc_options o = options_bg(1);
  mtc_plan *plan;
  uint64_t s0;
  CHECK_OK(mtc_stream_create(0, &s0));
  CHECK_STATUS(mtc_plan_set_stream(NULL, 0, s0), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_create(device_count - 1, &o, &plan));
  CHECK_STATUS(mtc_plan_set_stream(plan, -1, s0), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "device -1 is not a CUDA ordinal");
  CHECK_STATUS(mtc_plan_set_stream(plan, 60, s0), MTC_ERR_NO_DEVICE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "cuda:60 requested");
  /* Set, replaced, taken back out with 0. */
  CHECK_OK(mtc_plan_set_stream(plan, 0, s0));
  CHECK_OK(mtc_plan_set_stream(plan, 0, s0));
  CHECK_OK(mtc_plan_set_stream(plan, 0, 0));
  mtc_leaf leaf = scratch_leaf(0, 0, 256);
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_STATUS(mtc_plan_set_stream(plan, 0, s0), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "before submit");
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);
  if (!is_fake || device_count < 2) {
    /* A real driver may crash on a destroyed stream: emulation only. */
    mtc_stream_destroy(0, s0);
    check_no_context_left();
    return;
  }

  /* A stream that is not a stream: found at submit, naming the device. */
  uint64_t gone;
  CHECK_OK(mtc_stream_create(0, &gone));
  mtc_stream_destroy(0, gone);
  for (uint32_t background = 0; background < 2; background++) {
    o = options_bg(background);
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
    CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
    CHECK_OK(mtc_plan_set_stream(plan, 0, gone));
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_plan_last_error(plan),
                   "cuEventRecord on the stream set for cuda:0");
    CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_INVALID_HANDLE");
    CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_CUDA);
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_STATE);
    mtc_event *e = (mtc_event *)1;
    CHECK_STATUS(mtc_plan_completion_event(plan, &e), MTC_ERR_CUDA);
    CHECK(e == NULL);
    mtc_plan_release(plan);

    /* On the target: the wait fails and the copy is undone. */
    uint8_t bytes[100] = {0};
    mtc_leaf host = make_leaf(host_address(bytes), sizeof bytes, 1,
                              MTC_DEVICE_CPU);
    CHECK_OK(mtc_plan_create(0, &o, &plan));
    CHECK_OK(mtc_plan_add_leaf(plan, &host, NULL));
    CHECK_OK(mtc_plan_set_stream(plan, 0, gone));
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_CUDA);
    CHECK_CONTAINS(mtc_plan_last_error(plan), "the stream set for cuda:0");
    CHECK_STATUS(mtc_plan_poll(plan), MTC_ERR_CUDA);
    mtc_plan_release(plan);
  }
  /* A stream of the plan's that the plan does not read from or write to
   * is never touched: no error. */
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_set_stream(plan, 1, gone));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);
  mtc_stream_destroy(0, s0);
  check_no_context_left();
}

/* ------------------------------------------------------------ threads */

typedef struct thread_arg {
  int index;
  int failures;
} thread_arg;

/* Each thread: its own stream on each device; host -> device plans ordered
 * on the target stream, read back device -> host ordered on the source. */
static void *stream_thread(void *arg) {
  thread_arg *t = arg;
  int device = t->index % device_count;
  uint64_t stream = 0;
  if (mtc_stream_create(device, &stream) != MTC_OK) {
    t->failures++;
    return NULL;
  }
  for (int round = 0; round < 15; round++) {
    uint32_t values[4][50];
    mtc_leaf leaves[4];
    for (int l = 0; l < 4; l++) {
      for (int i = 0; i < 50; i++) values[l][i] = (uint32_t)(t->index * 100000 + round * 100 + l * 50 + i);
      leaves[l] = make_leaf(host_address(values[l]), sizeof values[l], 4, MTC_DEVICE_CPU);
    }
    mtc_options o = options_bg((uint32_t)(round % 2));
    mtc_plan *plan = NULL, *back = NULL;
    mtc_leaf_result r[4], h[4];
    mtc_event *done = NULL;
    int ok = mtc_plan_create(device, &o, &plan) == MTC_OK &&
             mtc_plan_add_leaves(plan, leaves, 4) == MTC_OK &&
             mtc_plan_set_stream(plan, device, stream) == MTC_OK &&
             mtc_plan_submit(plan) == MTC_OK &&
             mtc_plan_completion_event(plan, &done) == MTC_OK &&
             mtc_plan_wait(plan) == MTC_OK &&
             mtc_plan_results(plan, 0, 4, r) == MTC_OK;
    if (ok) {
      mtc_leaf dev[4];
      for (int l = 0; l < 4; l++) dev[l] = make_leaf(r[l].address, sizeof values[l], 4, device);
      ok = mtc_plan_create(MTC_DEVICE_CPU, &o, &back) == MTC_OK &&
           mtc_plan_add_leaves(back, dev, 4) == MTC_OK &&
           mtc_plan_set_stream(back, device, stream) == MTC_OK &&
           mtc_plan_submit(back) == MTC_OK && mtc_plan_wait(back) == MTC_OK &&
           mtc_plan_results(back, 0, 4, h) == MTC_OK;
      for (int l = 0; ok && l < 4; l++) {
        ok = memcmp((void *)(uintptr_t)h[l].address, values[l], sizeof values[l]) == 0;
      }
    }
    if (!ok || done == NULL || mtc_event_query(done) != MTC_OK) t->failures++;
    mtc_event_release(done);
    mtc_plan_release(back);
    mtc_plan_release(plan);
  }
  if (mtc_stream_synchronize(device, stream) != MTC_OK) t->failures++;
  mtc_stream_destroy(device, stream);
  return NULL;
}

static void test_threads(void) {
  enum { THREADS = 6 };
  pthread_t threads[THREADS];
  thread_arg args[THREADS];
  set_delay(300);
  for (int i = 0; i < THREADS; i++) {
    args[i].index = i;
    args[i].failures = 0;
    pthread_create(&threads[i], NULL, stream_thread, &args[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK(args[i].failures == 0);
  }
  set_delay(0);
}

/* ------------------------------------------------------------ the end */

static void test_release_callback(void) {
  uint8_t bytes[32] = {0};
  mtc_leaf host = make_leaf(host_address(bytes), sizeof bytes, 1,
                            MTC_DEVICE_CPU);
  host.row_count = 2;
  host.row_pitch = 16;
  mtc_options o = options_bg(0);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &host, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result r;
  CHECK_OK(mtc_plan_results(plan, 0, 1, &r));
  CHECK(r.block != NULL);
  mtc_block_retain(r.block);
  mtc_plan_release(plan);
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  uint64_t live = stats.blocks_live;
  /* As an external-memory deallocator would call it. */
  void (*dealloc)(void *, void *) = mtc_block_release_callback;
  dealloc((void *)(uintptr_t)r.address, r.block);
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.blocks_live, live - 1);
  mtc_block_release_callback(NULL, NULL);
}

static void test_nothing_left(int streams_at_start) {
  mtc_stats stats;
  memset(&stats, 0xFF, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.plans_live, 0);
  CHECK_EQ_U64(stats.blocks_live, 0);
  CHECK_EQ_U64(stats.device_bytes_live, 0);
  CHECK_EQ_U64(stats.host_bytes_live, 0);
  CHECK_EQ_U64(stats.pinned_bytes_in_use, 0);
  CHECK_EQ_U64(mtc_event_live_count(), 0);
  if (!is_fake) return;
  /* Every stream we made is gone (the library's two copy streams stay),
   * and every driver event is back in a device's free list. */
  CHECK(fake.live_streams() == streams_at_start);
  CHECK(fake.live_events() == mtc_device_spare_event_total());
  mtc_trim_pools();
  CHECK(fake.live_device_allocations() == 0);
  CHECK(fake.live_host_allocations() == 0);
}

int main(int argc, char **argv) {
  /* All before the first libmtc call: the driver is loaded once. */
  if (argc > 1) setenv("MTC_CUDA_DRIVER", argv[1], 1);
  const char *driver = getenv("MTC_CUDA_DRIVER");
  if (driver == NULL) {
    printf("test_streams: pass the emulated driver's path (or set "
           "MTC_CUDA_DRIVER)\n");
    return 1;
  }
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_DEVICE_MEMORY_BYTES", "256m", 1);
  setenv("MTC_STAGING_THREADS", "4", 0);
  load_fake(driver);
  is_fake = fake.set_copy_delay_us != NULL && fake.live_streams != NULL &&
            fake.live_events != NULL && fake.kernel_launches != NULL;
  int32_t count = 0;
  CHECK_OK(mtc_cuda_device_count(&count));
  device_count = count;
  if (is_fake) {
    CHECK(count == 2);
    if (count != 2) return check_summary("test_streams");
  } else {
    printf("test_streams: running against %s (not emulated), %d device%s, "
           "%s\n",
           driver, count, count == 1 ? "" : "s",
           mtc_has_kernels() ? "with kernels" : "without kernels");
    if (count < 1) return check_summary("test_streams");
  }
  can_busy = is_fake || mtc_has_kernels();

  setup_scratch();
  int streams_at_start = is_fake ? fake.live_streams() : 0;
  test_streams();
  test_events();
  test_wait_event_across_devices();
  for (uint32_t background = 0; background < 2; background++) {
    test_source_stream_orders_copy(MTC_DEVICE_CPU, background);
    test_source_stream_orders_copy(1, background);
    test_target_stream(background);
    test_both_streams(background);
    test_stats(background);
    test_device_to_host_paths(background);
    test_device_to_device_paths(background);
  }
  test_completion_events();
  test_peer_setup_once();
  test_set_stream_errors();
  test_threads();
  test_release_callback();
  teardown_scratch();
  test_nothing_left(streams_at_start);
  check_no_context_left();
  return check_summary("test_streams");
}
