/* test_device.c — device paths against the emulated driver (libfakecuda.so,
 * path in argv[1] or MTC_CUDA_DRIVER): device memory is host memory there,
 * so results can also be checked in place. Two devices.
 *
 * Given libcuda.so.1 instead, it runs against a real GPU: then the checks
 * that need the emulation (modelled copy delays, a small device memory,
 * copy counters, reading device memory in place) are skipped. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"

struct CUctx_st; /* the driver's CUcontext points at one */

/* The emulated driver's test-only exports (NULL when absent). */
static struct {
  void (*set_copy_delay_us)(unsigned long long us);
  unsigned long long (*pageable_copy_count)(void);
  unsigned long long (*copy_count)(void);
  int (*live_device_allocations)(void);
  int (*live_host_allocations)(void);
  /* As the driver defines it: calling through a pointer of another type
   * is undefined (and traps under -fsanitize=function, as in ReleaseSafe). */
  int (*cu_ctx_get_current)(struct CUctx_st **ctx);
} fake;

static void load_fake(const char *path) {
  void *handle = fake_open(path);
  if (handle == NULL) return;
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  FAKE_SYM(handle, fake.pageable_copy_count, "fake_cuda_pageable_copy_count");
  FAKE_SYM(handle, fake.copy_count, "fake_cuda_copy_count");
  FAKE_SYM(handle, fake.live_device_allocations, "fake_cuda_live_device_allocations");
  FAKE_SYM(handle, fake.live_host_allocations, "fake_cuda_live_host_allocations");
  FAKE_SYM(handle, fake.cu_ctx_get_current, "cuCtxGetCurrent");
}

/* Set in main: whether the driver is the emulation, and its device count. */
static int is_fake;
static int32_t device_count;

static void set_delay(unsigned long long us) {
  if (fake.set_copy_delay_us) fake.set_copy_delay_us(us);
}

static unsigned long long pageable_copies(void) {
  return fake.pageable_copy_count ? fake.pageable_copy_count() : 0;
}

static unsigned long long all_copies(void) {
  return fake.copy_count ? fake.copy_count() : 0;
}

/* The caller's thread must have no current context after libmtc calls. */
static void check_no_context_left(void) {
  if (fake.cu_ctx_get_current == NULL) return;
  struct CUctx_st *ctx = (struct CUctx_st *)1;
  CHECK(fake.cu_ctx_get_current(&ctx) == 0);
  CHECK(ctx == NULL);
}

/* Creates, fills, submits and waits for a plan; results go to out. */
static mtc_plan *run_plan(int32_t target, const mtc_options *options,
                          const mtc_leaf *leaves, uint64_t count,
                          mtc_leaf_result *out) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, options, &plan));
  if (plan == NULL) return NULL;
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, count, out));
  return plan;
}

/* Reads device results back through a device->host plan and compares them
 * with the expected host bytes. */
static void check_on_device(const mtc_leaf_result *results,
                            const mtc_leaf *sources, uint64_t count,
                            uint32_t background) {
  mtc_leaf *back = calloc(count, sizeof *back);
  mtc_leaf_result *host = calloc(count, sizeof *host);
  for (uint64_t i = 0; i < count; i++) {
    back[i] = make_leaf(results[i].address,
                        sources[i].bytes, sources[i].element_size,
                        results[i].device);
  }
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_plan *plan = run_plan(MTC_DEVICE_CPU, &o, back, count, host);
  for (uint64_t i = 0; i < count; i++) {
    CHECK(host[i].device == MTC_DEVICE_CPU);
    if (sources[i].bytes == 0) continue;
    CHECK(host[i].block != NULL);
    mtc_block_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(mtc_block_get_info(host[i].block, &info));
    CHECK(info.pinned == 1);
    CHECK(info.device == MTC_DEVICE_CPU);
    const uint8_t *got = (const uint8_t *)(uintptr_t)host[i].address;
    const uint8_t *want = (const uint8_t *)(uintptr_t)sources[i].address;
    int same = 1;
    if (sources[i].row_count > 1) {
      uint64_t row = sources[i].bytes / sources[i].row_count;
      for (uint32_t r = 0; r < sources[i].row_count && same; r++) {
        same = memcmp(got + r * row, want + r * sources[i].row_pitch,
                      (size_t)row) == 0;
      }
    } else {
      same = memcmp(got, want, (size_t)sources[i].bytes) == 0;
    }
    if (!same) printf("leaf %llu differs after the round trip\n",
                      (unsigned long long)i);
    CHECK(same);
  }
  mtc_plan_release(plan);
  free(back);
  free(host);
}

static void test_devices(void) {
  int32_t count = -1;
  CHECK_OK(mtc_cuda_device_count(&count));
  if (is_fake) CHECK(count == 2);
  CHECK(count == device_count);
  int32_t current = -1;
  CHECK_OK(mtc_cuda_current_device(&current));
  CHECK(current == 0);

  /* What the driver says of each device, of peer access, and of itself. */
  char name[64];
  uint64_t total = 0;
  CHECK_OK(mtc_cuda_device_describe(0, name, sizeof name, &total));
  CHECK(name[0] != '\0' && total > 0);
  if (is_fake) CHECK(strcmp(name, "Emulated GPU 0") == 0);
  CHECK_OK(mtc_cuda_device_describe(0, name, 4, &total));
  CHECK(strlen(name) == 3); /* cut to name_size - 1 */
  CHECK_STATUS(mtc_cuda_device_describe(count, name, sizeof name, &total), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_cuda_device_describe(0, name, sizeof name, NULL), MTC_ERR_INVALID_ARGUMENT);
  int32_t can = -1;
  CHECK_OK(mtc_cuda_can_access_peer(0, 0, &can));
  CHECK(can == 0);
  if (count > 1) {
    CHECK_OK(mtc_cuda_can_access_peer(0, 1, &can));
    if (is_fake) CHECK(can == 1);
  }
  CHECK_STATUS(mtc_cuda_can_access_peer(0, -1, &can), MTC_ERR_INVALID_ARGUMENT);
  int32_t version = 0;
  CHECK_OK(mtc_cuda_driver_version(&version));
  CHECK(version >= 11000);
  const char *file = mtc_cuda_driver_file();
  CHECK(file != NULL && strchr(file, '/') != NULL); /* resolved to a path */

  mtc_plan *plan = (mtc_plan *)1;
  char expected[128];
  snprintf(expected, sizeof expected,
           "cuda:%d requested but this machine has %d CUDA device%s",
           count + 3, count, count == 1 ? "" : "s");
  CHECK_STATUS(mtc_plan_create(count + 3, NULL, &plan), MTC_ERR_NO_DEVICE);
  CHECK(plan == NULL);
  CHECK_CONTAINS(mtc_last_error(), expected);

  /* A leaf on a device that does not exist is named at submit. */
  uint8_t byte = 0;
  mtc_leaf leaves[2] = {make_leaf(host_address(&byte), 1, 1, MTC_DEVICE_CPU),
                        make_leaf(0x1000, 1, 1, 70)};
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, 2));
  CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_NO_DEVICE);
  CHECK(mtc_plan_error_leaf(plan) == 1);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "leaf 1: cuda:70 requested");
  CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_NO_DEVICE);
  mtc_plan_release(plan);
  check_no_context_left();
}

/* Many small leaves of mixed dtypes: one shared block, aligned offsets. */
static void test_h2d_packed(uint32_t background) {
  enum { N = 40 };
  static const uint32_t sizes[] = {1, 2, 4, 8, 16};
  uint8_t *data[N];
  mtc_leaf leaves[N];
  for (int i = 0; i < N; i++) {
    uint32_t element = sizes[i % 5];
    uint64_t bytes = element * (uint64_t)(1 + (i * 37) % 300);
    data[i] = random_bytes((size_t)bytes);
    leaves[i] = make_leaf(host_address(data[i]), bytes, element, MTC_DEVICE_CPU);
  }
  /* One strided leaf among them: rows of 24 bytes, 40 apart. */
  uint8_t *rows = random_bytes(40 * 10);
  leaves[7] = make_leaf(host_address(rows), 24 * 10, 8, MTC_DEVICE_CPU);
  leaves[7].row_count = 10;
  leaves[7].row_pitch = 40;

  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  o.min_packed_alignment_bytes = 64;
  unsigned long long pageable_before = pageable_copies();
  mtc_leaf_result results[N];
  mtc_plan *plan = run_plan(0, &o, leaves, N, results);
  CHECK(pageable_copies() == pageable_before); /* staged through pinned */
  mtc_block *shared = results[0].block;
  CHECK(shared != NULL);
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(shared, &info));
  CHECK(info.device == 0);
  CHECK(info.pinned == 0);
  for (int i = 0; i < N; i++) {
    CHECK(results[i].block == shared);
    CHECK(results[i].flags == MTC_RESULT_PACKED);
    CHECK(results[i].device == 0);
    CHECK(results[i].offset % 64 == 0);
    CHECK_EQ_U64(results[i].address, info.address + results[i].offset);
    CHECK(results[i].offset + leaves[i].bytes <= info.bytes);
  }
  check_on_device(results, leaves, N, background);
  /* The emulated device memory is host memory: check in place too. */
  if (is_fake) {
    CHECK(memcmp((void *)(uintptr_t)results[0].address, data[0],
                 (size_t)leaves[0].bytes) == 0);
  }
  mtc_plan_release(plan);
  for (int i = 0; i < N; i++) free(data[i]);
  free(rows);
  check_no_context_left();
}

/* Own leaves: larger than a chunk, over several staging pieces (more than
 * the ring of piece buffers, so buffers are reused after their DMA),
 * strided, with and without pinned staging. */
static void test_h2d_own(uint32_t background, uint32_t pinned) {
  uint8_t *medium = random_bytes(10000);
  uint8_t *big = random_bytes(17 << 20);
  uint8_t *rows = random_bytes((size_t)2048 * 4096);
  mtc_leaf leaves[4] = {
      make_leaf(host_address(medium), 10000, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(big), 17 << 20, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(rows), (uint64_t)2048 * 3000, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(medium), 100, 4, MTC_DEVICE_CPU),
  };
  leaves[2].row_count = 2048;
  leaves[2].row_pitch = 4096;
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  o.use_pinned_staging = pinned;
  o.max_packed_chunk_bytes = 4096; /* the 10000-byte leaf is larger */
  o.staging_piece_bytes = 4 << 20; /* 17 MiB: five pieces */
  unsigned long long pageable_before = pageable_copies();
  unsigned long long copies_before = all_copies();
  /* Slow DMA: refilling a piece buffer must wait for its copy. */
  set_delay(3000);
  mtc_leaf_result results[4];
  mtc_plan *plan = run_plan(0, &o, leaves, 4, results);
  set_delay(0);
  if (fake.copy_count) {
    /* Pinned: one packed chunk + pieces 1 + 5 + 2 (5.9 MiB of rows);
     * pageable: one copy per leaf. */
    CHECK_EQ_U64(all_copies() - copies_before, pinned ? 9 : 4);
  }
  if (pinned) CHECK(pageable_copies() == pageable_before);
  if (!pinned && is_fake) CHECK(pageable_copies() > pageable_before);
  for (int i = 0; i < 3; i++) {
    CHECK(results[i].flags == 0);
    CHECK(results[i].block != NULL);
    CHECK(results[i].offset == 0);
  }
  CHECK(results[3].flags == MTC_RESULT_PACKED);
  CHECK(results[0].block != results[1].block);
  check_on_device(results, leaves, 4, background);
  mtc_plan_release(plan);
  free(medium);
  free(big);
  free(rows);
  check_no_context_left();
}

/* Many small own leaves share piece buffers; with small pieces they wrap
 * around the ring of buffers many times. */
static void test_h2d_many_own(uint32_t background) {
  enum { N = 60 };
  uint8_t *data[N];
  mtc_leaf leaves[N];
  for (int i = 0; i < N; i++) {
    uint64_t bytes = 1000 + (uint64_t)i * 97;
    data[i] = random_bytes((size_t)bytes);
    leaves[i] = make_leaf(host_address(data[i]), bytes, 1, MTC_DEVICE_CPU);
    leaves[i].flags = MTC_LEAF_NO_PACK;
  }
  for (int small = 0; small < 2; small++) {
    mtc_options o = MTC_OPTIONS_INIT;
    o.use_background_thread = background;
    o.staging_piece_bytes = small ? 8192 : (uint64_t)4 << 20;
    set_delay(small ? 500 : 0);
    mtc_leaf_result results[N];
    mtc_plan *plan = run_plan(0, &o, leaves, N, results);
    set_delay(0);
    for (int i = 0; i < N; i++) {
      CHECK(results[i].flags == 0);
      CHECK(results[i].block != NULL);
    }
    check_on_device(results, leaves, N, background);
    mtc_plan_release(plan);
  }
  for (int i = 0; i < N; i++) free(data[i]);
  check_no_context_left();
}

/* Device leaves: reused on their own device, copied to the other one, and
 * back to the host (packed and own). */
static void test_device_sources(uint32_t background) {
  if (device_count < 2) {
    printf("test_device_sources skipped: needs 2 CUDA devices\n");
    return;
  }
  uint8_t *small = random_bytes(3000);
  uint8_t *large = random_bytes(1 << 20);
  mtc_leaf host[3] = {make_leaf(host_address(small), 1000, 4, MTC_DEVICE_CPU),
                      make_leaf(host_address(small + 1000), 2000, 8, MTC_DEVICE_CPU),
                      make_leaf(host_address(large), 1 << 20, 4, MTC_DEVICE_CPU)};
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_leaf_result on0[3];
  mtc_plan *to0 = run_plan(0, &o, host, 3, on0);
  CHECK(on0[0].block == on0[1].block);
  CHECK(on0[2].block != on0[0].block);

  mtc_leaf device0[3];
  for (int i = 0; i < 3; i++) {
    device0[i] = make_leaf(on0[i].address, host[i].bytes,
                           host[i].element_size, 0);
  }
  /* Same device: reused as is. */
  mtc_leaf_result same[3];
  mtc_plan *reuse = run_plan(0, &o, device0, 3, same);
  for (int i = 0; i < 3; i++) {
    CHECK(same[i].flags == MTC_RESULT_REUSED);
    CHECK(same[i].block == NULL);
    CHECK_EQ_U64(same[i].address, on0[i].address);
    CHECK(same[i].device == 0);
  }
  mtc_plan_release(reuse);

  /* cuda:0 -> cuda:1: packed and own blocks on device 1. */
  mtc_leaf_result on1[3];
  mtc_plan *to1 = run_plan(1, &o, device0, 3, on1);
  CHECK(on1[0].block == on1[1].block);
  CHECK(on1[0].flags == MTC_RESULT_PACKED);
  CHECK(on1[2].flags == 0);
  for (int i = 0; i < 3; i++) {
    CHECK(on1[i].device == 1);
    mtc_block_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(mtc_block_get_info(on1[i].block, &info));
    CHECK(info.device == 1);
  }
  check_on_device(on1, host, 3, background);

  /* cuda:0 -> host, own leaf: a pinned block of its own. */
  mtc_leaf_result back[3];
  mtc_plan *to_host = run_plan(MTC_DEVICE_CPU, &o, device0, 3, back);
  CHECK(back[0].block == back[1].block);
  CHECK(back[2].flags == 0);
  CHECK(memcmp((void *)(uintptr_t)back[2].address, large, 1 << 20) == 0);
  CHECK(memcmp((void *)(uintptr_t)back[1].address, small + 1000, 2000) == 0);

  /* Mixed sources to cuda:1: host and cuda:0 leaves never share a chunk. */
  mtc_leaf mixed[4] = {host[0], device0[0], host[1], device0[1]};
  mtc_leaf_result mixed_out[4];
  mtc_plan *mixed_plan = run_plan(1, &o, mixed, 4, mixed_out);
  CHECK(mixed_out[0].block == mixed_out[2].block);
  CHECK(mixed_out[1].block == mixed_out[3].block);
  CHECK(mixed_out[0].block != mixed_out[1].block);
  mtc_leaf expect[4] = {host[0], host[0], host[1], host[1]};
  check_on_device(mixed_out, expect, 4, background);
  mtc_plan_release(mixed_plan);

  /* A block retained past its plan stays valid. */
  mtc_block *kept = on1[2].block;
  mtc_block_retain(kept);
  mtc_plan_release(to1);
  mtc_plan_release(to_host);
  mtc_plan_release(to0);
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.blocks_live, 1);
  CHECK_EQ_U64(stats.device_bytes_live, 1 << 20);
  mtc_block_release(kept);
  free(small);
  free(large);
  check_no_context_left();
}

/* With slow copies, poll reports IN_PROGRESS until they complete. */
static void test_poll_in_progress(uint32_t background) {
  if (!is_fake) {
    check_skip("poll in progress", "needs the emulated driver's copy delay");
    return;
  }
  uint8_t *data = random_bytes(4096);
  mtc_leaf leaf = make_leaf(host_address(data), 4096, 4, MTC_DEVICE_CPU);
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  set_delay(200 * 1000);
  mtc_plan *plan;
  double start = now_ms();
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_STATUS(mtc_plan_poll(plan), MTC_IN_PROGRESS);
  mtc_leaf_result result;
  CHECK_STATUS(mtc_plan_results(plan, 0, 1, &result), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "readable only after");
  CHECK_CONTAINS(mtc_last_error(), "readable only after");
  int polls = 0;
  mtc_status status;
  while ((status = mtc_plan_poll(plan)) == MTC_IN_PROGRESS) {
    struct timespec pause = {0, 1000 * 1000};
    nanosleep(&pause, NULL);
    polls++;
  }
  CHECK_OK(status);
  CHECK(polls > 2); /* a loaded machine may sleep far past 1 ms a poll */
  CHECK(now_ms() - start >= 150);
  CHECK_OK(mtc_plan_results(plan, 0, 1, &result));
  mtc_plan_release(plan);

  /* wait blocks until then; release of a plan in flight waits too. */
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  start = now_ms();
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK(now_ms() - start >= 150);
  mtc_plan_release(plan);

  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  mtc_plan_release(plan);
  set_delay(0);
  free(data);
}

/* Many plans in flight at once, on both directions, waited out of order. */
static void test_many_plans(void) {
  enum { PLANS = 48, LEAVES = 12 };
  set_delay(2000);
  mtc_plan *plans[PLANS];
  uint8_t *data[PLANS][LEAVES];
  mtc_leaf leaves[PLANS][LEAVES];
  for (int p = 0; p < PLANS; p++) {
    for (int l = 0; l < LEAVES; l++) {
      uint64_t bytes = 16 + (uint64_t)((p * 7 + l * 13) % 512);
      data[p][l] = random_bytes((size_t)bytes);
      leaves[p][l] = make_leaf(host_address(data[p][l]), bytes, 1, MTC_DEVICE_CPU);
    }
    mtc_options o = MTC_OPTIONS_INIT;
    o.use_background_thread = (uint32_t)(p % 3 != 0);
    CHECK_OK(mtc_plan_create(p % device_count, &o, &plans[p]));
    CHECK_OK(mtc_plan_add_leaves(plans[p], leaves[p], LEAVES));
    CHECK_OK(mtc_plan_submit(plans[p]));
  }
  set_delay(0);
  for (int p = PLANS - 1; p >= 0; p--) {
    CHECK_OK(mtc_plan_wait(plans[p]));
    mtc_leaf_result results[LEAVES];
    CHECK_OK(mtc_plan_results(plans[p], 0, LEAVES, results));
    for (int l = 0; l < LEAVES; l++) {
      CHECK(results[l].device == p % device_count);
      if (is_fake) {
        CHECK(memcmp((void *)(uintptr_t)results[l].address, data[p][l],
                     (size_t)leaves[p][l].bytes) == 0);
      }
    }
    if (p % 4 == 1 || !is_fake) {
      check_on_device(results, leaves[p], LEAVES, 1);
    }
    mtc_plan_release(plans[p]);
    for (int l = 0; l < LEAVES; l++) free(data[p][l]);
  }
  check_no_context_left();
}

typedef struct thread_arg {
  int index;
  int failures;
} thread_arg;

/* Plans driven from several threads at once. */
static void *copy_thread(void *arg) {
  thread_arg *t = arg;
  for (int round = 0; round < 20; round++) {
    uint32_t values[256];
    for (int i = 0; i < 256; i++) values[i] = (uint32_t)(t->index * 1000 + round * 7 + i);
    mtc_leaf leaf = make_leaf(host_address(values), sizeof values, 4, MTC_DEVICE_CPU);
    mtc_options o = MTC_OPTIONS_INIT;
    o.use_background_thread = (uint32_t)(round % 2);
    mtc_plan *plan;
    if (mtc_plan_create(t->index % device_count, &o, &plan) != MTC_OK) {
      t->failures++;
      continue;
    }
    mtc_leaf_result r;
    if (mtc_plan_add_leaf(plan, &leaf, NULL) != MTC_OK ||
        mtc_plan_submit(plan) != MTC_OK || mtc_plan_wait(plan) != MTC_OK ||
        mtc_plan_results(plan, 0, 1, &r) != MTC_OK) {
      t->failures++;
    } else {
      /* Read back with a device->host plan of this thread's own. */
      mtc_leaf back = make_leaf(r.address, sizeof values, 4,
                                r.device);
      mtc_plan *read = NULL;
      mtc_leaf_result h;
      if (mtc_plan_create(MTC_DEVICE_CPU, &o, &read) != MTC_OK ||
          mtc_plan_add_leaf(read, &back, NULL) != MTC_OK ||
          mtc_plan_submit(read) != MTC_OK || mtc_plan_wait(read) != MTC_OK ||
          mtc_plan_results(read, 0, 1, &h) != MTC_OK ||
          memcmp((void *)(uintptr_t)h.address, values, sizeof values) != 0) {
        t->failures++;
      }
      mtc_plan_release(read);
    }
    mtc_plan_release(plan);
  }
  return NULL;
}

static void test_threads(void) {
  enum { THREADS = 6 };
  pthread_t threads[THREADS];
  thread_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i].index = i;
    args[i].failures = 0;
    pthread_create(&threads[i], NULL, copy_thread, &args[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK(args[i].failures == 0);
  }
}

/* Out of device memory half-way: an error, and nothing leaks. */
static void test_out_of_memory(uint32_t background) {
  if (!is_fake) {
    check_skip("out of device memory", "needs the emulated driver's small device memory");
    return;
  }
  uint8_t *small = random_bytes(1000);
  /* Never touched: the device allocation fails before it is read. */
  size_t huge_bytes = (size_t)300 << 20;
  uint8_t *huge = malloc(huge_bytes);
  mtc_leaf leaves[2] = {make_leaf(host_address(small), 1000, 4, MTC_DEVICE_CPU),
                        make_leaf(host_address(huge), huge_bytes, 4, MTC_DEVICE_CPU)};
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, 2));
  mtc_status submitted = mtc_plan_submit(plan);
  CHECK(submitted == (background ? MTC_OK : MTC_ERR_OUT_OF_MEMORY));
  CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_OUT_OF_MEMORY);
  CHECK_STATUS(mtc_plan_poll(plan), MTC_ERR_OUT_OF_MEMORY);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK_CONTAINS(mtc_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
  mtc_leaf_result r;
  CHECK_STATUS(mtc_plan_results(plan, 0, 1, &r), MTC_ERR_INVALID_STATE);
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.blocks_live, 0);
  CHECK_EQ_U64(stats.pinned_bytes_in_use, 0);
  mtc_plan_release(plan);
  free(small);
  free(huge);
  check_no_context_left();
}

static void test_stats_zero(void) {
  mtc_stats stats;
  memset(&stats, 0xFF, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.plans_live, 0);
  CHECK_EQ_U64(stats.blocks_live, 0);
  CHECK_EQ_U64(stats.device_bytes_live, 0);
  CHECK_EQ_U64(stats.host_bytes_live, 0);
  CHECK_EQ_U64(stats.pinned_bytes_in_use, 0);
  CHECK(stats.pinned_allocations > 0);
  CHECK(stats.pinned_reuses > 0); /* the pool served repeat copies */
  CHECK(stats.pinned_bytes_cached > 0);
  mtc_trim_pools();
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.pinned_bytes_cached, 0);
  if (fake.live_device_allocations) CHECK(fake.live_device_allocations() == 0);
  if (fake.live_host_allocations) CHECK(fake.live_host_allocations() == 0);
}

int main(int argc, char **argv) {
  /* All before the first libmtc call: the driver is loaded once. */
  if (argc > 1) setenv("MTC_CUDA_DRIVER", argv[1], 1);
  const char *driver = getenv("MTC_CUDA_DRIVER");
  if (driver == NULL) {
    printf("test_device: pass the emulated driver's path (or set "
           "MTC_CUDA_DRIVER)\n");
    return 1;
  }
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_DEVICE_MEMORY_BYTES", "256m", 1);
  setenv("MTC_STAGING_THREADS", "4", 0);
  /* Idle staging workers and waiting callers spin before they sleep (as
   * on machines of 4 or more cores); test_host covers the sleeping path. */
  setenv("MTC_SPIN_US", "200", 0);
  load_fake(driver);
  is_fake = fake.set_copy_delay_us != NULL;
  if (!is_fake) printf("test_device: running against %s (not emulated)\n", driver);
  device_count = 0;
  CHECK_OK(mtc_cuda_device_count(&device_count));
  if (device_count < 1) return check_summary("test_device");

  test_devices();
  for (uint32_t background = 0; background < 2; background++) {
    test_h2d_packed(background);
    test_h2d_own(background, 1);
    test_h2d_own(background, 0);
    test_h2d_many_own(background);
    test_device_sources(background);
    test_poll_in_progress(background);
    test_out_of_memory(background);
  }
  test_many_plans();
  test_threads();
  test_stats_zero();
  return check_summary("test_device");
}
