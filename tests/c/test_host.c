/* test_host.c — host paths and error handling through the public ABI, on a
 * machine without CUDA: MTC_CUDA_DRIVER points at a file that is not there. */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

#define MISSING_DRIVER "/nonexistent/mtc-test/libcuda-missing.so"

static mtc_leaf host_leaf(const void *data, uint64_t bytes,
                          uint32_t element_size) {
  mtc_leaf leaf = {0};
  leaf.address = (uint64_t)(uintptr_t)data;
  leaf.bytes = bytes;
  leaf.device = MTC_DEVICE_CPU;
  leaf.element_size = element_size;
  return leaf;
}

static mtc_options options_bg(uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  return o;
}

static void test_version_and_names(void) {
  CHECK_EQ_U64(mtc_version_number(), MTC_VERSION_NUMBER);
  CHECK(strcmp(mtc_version_string(), "0.1.0") == 0);
  CHECK(strcmp(mtc_status_name(MTC_OK), "MTC_OK") == 0);
  CHECK(strcmp(mtc_status_name(MTC_IN_PROGRESS), "MTC_IN_PROGRESS") == 0);
  CHECK(strcmp(mtc_status_name(MTC_ERR_INTERNAL), "MTC_ERR_INTERNAL") == 0);
  CHECK(strcmp(mtc_status_name(42), "MTC_UNKNOWN_STATUS") == 0);
  CHECK(strcmp(mtc_status_name(-1), "MTC_UNKNOWN_STATUS") == 0);
}

static void test_options(void) {
  mtc_options from_macro = MTC_OPTIONS_INIT, from_call;
  memset(&from_call, 0xAB, sizeof from_call);
  mtc_options_init(&from_call);
  CHECK(memcmp(&from_macro, &from_call, sizeof from_call) == 0);
  CHECK_EQ_U64(from_call.struct_size, 56);
  mtc_options_init(NULL);

  mtc_plan *plan = (mtc_plan *)1;
  mtc_options o = MTC_OPTIONS_INIT;
  const uint64_t bad_alignments[] = {0, 4097, 8192, UINT64_MAX};
  for (int i = 0; i < 4; i++) {
    o = (mtc_options)MTC_OPTIONS_INIT;
    o.min_packed_alignment_bytes = bad_alignments[i];
    CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
                 MTC_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL);
    CHECK_CONTAINS(mtc_last_error(), "min_packed_alignment_bytes");
  }
  const uint64_t good_alignments[] = {1, 3, 6, 4096};
  for (int i = 0; i < 4; i++) {
    o = (mtc_options)MTC_OPTIONS_INIT;
    o.min_packed_alignment_bytes = good_alignments[i];
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
    mtc_plan_release(plan);
  }
  o = (mtc_options)MTC_OPTIONS_INIT;
  o.max_packed_chunk_bytes = 0;
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "max_packed_chunk_bytes");
  o.max_packed_chunk_bytes = ((uint64_t)1 << 40) + 1;
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
               MTC_ERR_INVALID_ARGUMENT);
  o.max_packed_chunk_bytes = (uint64_t)1 << 40;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  mtc_plan_release(plan);

  o = (mtc_options)MTC_OPTIONS_INIT;
  o.staging_piece_bytes = 4095;
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "staging_piece_bytes");

  o = (mtc_options)MTC_OPTIONS_INIT;
  o.struct_size = 0;
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "struct_size");
  o.struct_size = sizeof o - 8;
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan),
               MTC_ERR_INVALID_ARGUMENT);

  /* A newer caller's larger struct is accepted; the tail is ignored. */
  struct {
    mtc_options options;
    uint64_t future_field;
  } newer;
  mtc_options_init(&newer.options);
  newer.options.struct_size = sizeof newer;
  newer.future_field = 12345;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &newer.options, &plan));
  mtc_plan_release(plan);

  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan)); /* defaults */
  mtc_plan_release(plan);
  CHECK_STATUS(mtc_plan_create(-2, NULL, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_create(MTC_DEVICE_CPU, NULL, NULL),
               MTC_ERR_INVALID_ARGUMENT);
}

static void test_null_handling(void) {
  mtc_plan_release(NULL);
  mtc_block_retain(NULL);
  mtc_block_release(NULL);
  CHECK(strcmp(mtc_plan_last_error(NULL), "") == 0);
  CHECK(mtc_plan_error_leaf(NULL) == -1);
  CHECK_EQ_U64(mtc_plan_leaf_count(NULL), 0);
  mtc_leaf leaf = {0};
  leaf.element_size = 1;
  CHECK_STATUS(mtc_plan_add_leaf(NULL, &leaf, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_add_leaves(NULL, &leaf, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_submit(NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_poll(NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_wait(NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_leaf_result result;
  CHECK_STATUS(mtc_plan_results(NULL, 0, 1, &result), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_get_stats(NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  CHECK_STATUS(mtc_block_get_info(NULL, &info), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_cuda_device_count(NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_cuda_current_device(NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_stats small = {0};
  small.struct_size = 8;
  CHECK_STATUS(mtc_get_stats(&small), MTC_ERR_INVALID_ARGUMENT);

  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_STATUS(mtc_plan_add_leaf(plan, NULL, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_add_leaves(plan, NULL, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_add_leaves(plan, NULL, 0));
  CHECK(strcmp(mtc_plan_last_error(plan), "") != 0);
  mtc_plan_release(plan);
}

static void test_reuse_and_strided(uint32_t background) {
  static const char text[] = "hello, tensors";
  float values[64];
  for (int i = 0; i < 64; i++) values[i] = (float)i * 0.5f;
  /* 8 rows of 3 floats, 8 floats apart: a [8,3] slice of an [8,8] array. */
  uint8_t rows_src[8 * 32];
  for (int i = 0; i < (int)sizeof rows_src; i++) rows_src[i] = (uint8_t)i;

  mtc_leaf leaves[5] = {
      host_leaf(text, sizeof text, 1),
      host_leaf(values, sizeof values, 4),
      host_leaf(NULL, 0, 4),
      host_leaf(rows_src, 8 * 12, 4),
      host_leaf(rows_src + 4, 8 * 12, 4),
  };
  leaves[3].row_count = 8;
  leaves[3].row_pitch = 32;
  leaves[4].row_count = 8;
  leaves[4].row_pitch = 32;
  leaves[4].flags = MTC_LEAF_NO_PACK;

  mtc_options o = options_bg(background);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  uint64_t index = 99;
  CHECK_OK(mtc_plan_add_leaf(plan, &leaves[0], &index));
  CHECK_EQ_U64(index, 0);
  CHECK_OK(mtc_plan_add_leaves(plan, &leaves[1], 4));
  CHECK_EQ_U64(mtc_plan_leaf_count(plan), 5);
  mtc_leaf_result results[5];
  CHECK_STATUS(mtc_plan_results(plan, 0, 5, results), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_plan_poll(plan), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "not submitted");
  CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_INVALID_STATE);
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "already submitted");
  CHECK_STATUS(mtc_plan_add_leaf(plan, &leaves[0], NULL),
               MTC_ERR_INVALID_STATE);
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_poll(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, 5, results));
  CHECK_STATUS(mtc_plan_results(plan, 4, 2, results), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_results(plan, 6, 0, results), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_results(plan, 5, 0, NULL));

  for (int i = 0; i < 2; i++) {
    CHECK_EQ_U64(results[i].address, leaves[i].address);
    CHECK(results[i].block == NULL);
    CHECK(results[i].device == MTC_DEVICE_CPU);
    CHECK(results[i].flags == MTC_RESULT_REUSED);
  }
  CHECK_EQ_U64(results[2].address, 0);
  CHECK(results[2].block == NULL);

  /* Strided leaves: dense copies. The packable one is PACKED into a host
   * chunk, the NO_PACK one has a block of its own. */
  CHECK(results[3].flags == MTC_RESULT_PACKED);
  CHECK(results[4].flags == 0);
  CHECK(results[3].block != NULL && results[4].block != NULL);
  CHECK(results[3].block != results[4].block);
  for (int l = 3; l < 5; l++) {
    const uint8_t *dense = (const uint8_t *)(uintptr_t)results[l].address;
    const uint8_t *src = (const uint8_t *)(uintptr_t)leaves[l].address;
    int same = 1;
    for (int r = 0; r < 8; r++) {
      if (memcmp(dense + r * 12, src + r * 32, 12) != 0) same = 0;
    }
    CHECK(same);
    mtc_block_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(mtc_block_get_info(results[l].block, &info));
    CHECK(info.device == MTC_DEVICE_CPU);
    CHECK(info.pinned == 0);
    CHECK_EQ_U64(results[l].address - info.address, results[l].offset);
    CHECK(results[l].offset + 96 <= info.bytes);
  }

  /* Keep one block past the plan. */
  mtc_block *kept = results[4].block;
  mtc_block_retain(kept);
  mtc_plan_release(plan);
  mtc_stats stats = {0};
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.blocks_live, 1);
  CHECK_EQ_U64(stats.host_bytes_live, 96);
  const uint8_t *still = (const uint8_t *)(uintptr_t)results[4].address;
  CHECK(memcmp(still, rows_src + 4, 12) == 0);
  mtc_block_release(kept);
}

static void test_leaf_errors(void) {
  uint8_t data[256];
  memset(data, 7, sizeof data);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  mtc_leaf good = host_leaf(data, 16, 4);
  CHECK_OK(mtc_plan_add_leaf(plan, &good, NULL));

  struct {
    mtc_leaf bad;
    mtc_status status;
    const char *text;
  } cases[7];
  for (int i = 0; i < 7; i++) cases[i].bad = host_leaf(data, 64, 4);
  cases[0].bad.address = 0;
  cases[0].status = MTC_ERR_INVALID_ARGUMENT;
  cases[0].text = "address is 0";
  cases[1].bad.element_size = 3;
  cases[1].status = MTC_ERR_INVALID_ARGUMENT;
  cases[1].text = "element_size";
  cases[2].bad.element_size = 0;
  cases[2].status = MTC_ERR_INVALID_ARGUMENT;
  cases[2].text = "element_size";
  cases[3].bad.row_count = 3; /* 64 is not a multiple of 3 */
  cases[3].bad.row_pitch = 64;
  cases[3].status = MTC_ERR_INVALID_ARGUMENT;
  cases[3].text = "row_count";
  cases[4].bad.row_count = 4; /* rows of 16 bytes, 8 apart */
  cases[4].bad.row_pitch = 8;
  cases[4].status = MTC_ERR_INVALID_ARGUMENT;
  cases[4].text = "row_pitch";
  cases[5].bad.device = -2;
  cases[5].status = MTC_ERR_INVALID_ARGUMENT;
  cases[5].text = "device";
  cases[6].bad.device = 0; /* a strided device leaf */
  cases[6].bad.row_count = 4;
  cases[6].bad.row_pitch = 32;
  cases[6].status = MTC_ERR_UNSUPPORTED;
  cases[6].text = "strided";

  for (int i = 0; i < 7; i++) {
    /* The bad leaf is the third of the batch: plan index 1 + 2 = 3. */
    mtc_leaf batch[4] = {good, good, cases[i].bad, good};
    CHECK_STATUS(mtc_plan_add_leaves(plan, batch, 4), cases[i].status);
    CHECK_EQ_U64(mtc_plan_leaf_count(plan), 1);
    CHECK(mtc_plan_error_leaf(plan) == 3);
    CHECK(strncmp(mtc_plan_last_error(plan), "leaf 3: ", 8) == 0);
    CHECK(strncmp(mtc_last_error(), "leaf 3: ", 8) == 0);
    CHECK_CONTAINS(mtc_plan_last_error(plan), cases[i].text);
  }
  /* Single adds report their own index. */
  CHECK_STATUS(mtc_plan_add_leaf(plan, &cases[1].bad, NULL),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK(mtc_plan_error_leaf(plan) == 1);
  CHECK(strncmp(mtc_plan_last_error(plan), "leaf 1: ", 8) == 0);

  /* Zero-byte leaves may have address 0; strided ones with exact pitch. */
  mtc_leaf zero = host_leaf(NULL, 0, 8);
  CHECK_OK(mtc_plan_add_leaf(plan, &zero, NULL));
  mtc_leaf tight = host_leaf(data, 64, 4);
  tight.row_count = 4;
  tight.row_pitch = 16;
  CHECK_OK(mtc_plan_add_leaf(plan, &tight, NULL));
  CHECK_EQ_U64(mtc_plan_leaf_count(plan), 3);
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);
}

static void test_no_driver(void) {
  mtc_plan *plan = (mtc_plan *)1;
  CHECK_STATUS(mtc_plan_create(0, NULL, &plan), MTC_ERR_NO_DRIVER);
  CHECK(plan == NULL);
  CHECK_CONTAINS(mtc_last_error(), MISSING_DRIVER);
  int32_t count = -1;
  CHECK_STATUS(mtc_cuda_device_count(&count), MTC_ERR_NO_DRIVER);
  CHECK(count == 0);
  CHECK_CONTAINS(mtc_last_error(), MISSING_DRIVER);
  int32_t device = -1;
  CHECK_STATUS(mtc_cuda_current_device(&device), MTC_ERR_NO_DRIVER);
  CHECK(device == 0);

  /* Pinned memory the caller holds: pageable memory in its place, used the
   * same way, counted against no pinned limit (mtc/pinned.h). */
  for (int32_t ordinal = 0; ordinal < 4; ordinal += 3) {
    mtc_block *block = NULL;
    CHECK_OK(mtc_host_block_alloc(ordinal, 3000, &block));
    mtc_block_info info = {.struct_size = sizeof info};
    CHECK_OK(mtc_block_get_info(block, &info));
    CHECK(info.device == MTC_DEVICE_CPU && info.pinned == 0);
    CHECK(info.address % 16 == 0 && info.bytes >= 3000);
    memset((void *)(uintptr_t)info.address, 7, 3000);
    CHECK(mtc_block_busy(block) == 0);
    CHECK_OK(mtc_block_wait_idle(block));
    mtc_block_release(block);
  }
  mtc_block *none = NULL;
  CHECK_STATUS(mtc_host_block_alloc(-1, 64, &none), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_host_block_alloc(0, 0, &none), MTC_ERR_INVALID_ARGUMENT);
  CHECK(none == NULL);

  /* A device leaf in a host plan: the submit names the leaf. */
  for (uint32_t background = 0; background < 2; background++) {
    mtc_options o = options_bg(background);
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
    uint8_t byte = 1;
    mtc_leaf leaves[2] = {host_leaf(&byte, 1, 1), host_leaf(&byte, 1, 1)};
    leaves[1].device = 0;
    CHECK_OK(mtc_plan_add_leaves(plan, leaves, 2));
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_NO_DRIVER);
    CHECK(mtc_plan_error_leaf(plan) == 1);
    CHECK(strncmp(mtc_plan_last_error(plan), "leaf 1: ", 8) == 0);
    CHECK_CONTAINS(mtc_plan_last_error(plan), MISSING_DRIVER);
    /* A failed submit ends the plan; wait and poll do not hang. */
    CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_NO_DRIVER);
    CHECK_STATUS(mtc_plan_poll(plan), MTC_ERR_NO_DRIVER);
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_STATE);
    mtc_plan_release(plan);
  }
}

/* A large strided leaf goes through the parallel staging path. */
static void test_big_strided(uint32_t background) {
  const uint32_t rows = 4096, row_bytes = 1000, pitch = 1024;
  uint8_t *src = malloc((size_t)rows * pitch);
  for (size_t i = 0; i < (size_t)rows * pitch; i++) {
    src[i] = (uint8_t)(i * 31 + i / 977);
  }
  mtc_leaf leaf = host_leaf(src, (uint64_t)rows * row_bytes, 8);
  leaf.row_count = rows;
  leaf.row_pitch = pitch;
  mtc_options o = options_bg(background);
  o.staging_threads = background ? 0 : 3;
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result result;
  CHECK_OK(mtc_plan_results(plan, 0, 1, &result));
  const uint8_t *dense = (const uint8_t *)(uintptr_t)result.address;
  int same = 1;
  for (uint32_t r = 0; r < rows && same; r++) {
    if (memcmp(dense + (size_t)r * row_bytes, src + (size_t)r * pitch,
               row_bytes) != 0) {
      same = 0;
    }
  }
  CHECK(same);
  CHECK(result.flags == 0); /* over the packing threshold: own block */
  mtc_plan_release(plan);
  free(src);
}

/* Many plans in flight on the background thread, finished out of order. */
static void test_many_plans(void) {
  enum { PLANS = 64 };
  mtc_plan *plans[PLANS];
  uint32_t data[PLANS][16];
  for (int p = 0; p < PLANS; p++) {
    for (int i = 0; i < 16; i++) data[p][i] = (uint32_t)(p * 100 + i);
    mtc_options o = options_bg(1);
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plans[p]));
    mtc_leaf leaf = host_leaf(data[p], 64, 4);
    leaf.row_count = 2;
    leaf.row_pitch = 32;
    CHECK_OK(mtc_plan_add_leaf(plans[p], &leaf, NULL));
    CHECK_OK(mtc_plan_submit(plans[p]));
  }
  for (int p = PLANS - 1; p >= 0; p--) {
    CHECK_OK(mtc_plan_wait(plans[p]));
    mtc_leaf_result result;
    CHECK_OK(mtc_plan_results(plans[p], 0, 1, &result));
    const uint32_t *dense = (const uint32_t *)(uintptr_t)result.address;
    CHECK(memcmp(dense, data[p], 64) == 0);
    /* Releasing odd plans without waiting first. */
    mtc_plan_release(plans[p]);
  }
}

typedef struct waiter_arg {
  mtc_plan *plan;
  mtc_status status;
} waiter_arg;

static void *waiter(void *arg) {
  waiter_arg *w = arg;
  w->status = mtc_plan_wait(w->plan);
  return NULL;
}

static void test_concurrent_waiters(void) {
  uint8_t *src = malloc(8 << 20);
  memset(src, 0x5A, 8 << 20);
  mtc_leaf leaf = host_leaf(src, 4 << 20, 1);
  leaf.row_count = 2;
  leaf.row_pitch = 4 << 20;
  mtc_options o = options_bg(1);
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &o, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &leaf, NULL));
  CHECK_OK(mtc_plan_submit(plan));
  waiter_arg args[3];
  pthread_t threads[3];
  for (int i = 0; i < 3; i++) {
    args[i].plan = plan;
    args[i].status = MTC_ERR_INTERNAL;
    pthread_create(&threads[i], NULL, waiter, &args[i]);
  }
  mtc_status polled;
  while ((polled = mtc_plan_poll(plan)) == MTC_IN_PROGRESS) {
  }
  CHECK_OK(polled);
  for (int i = 0; i < 3; i++) {
    pthread_join(threads[i], NULL);
    CHECK_OK(args[i].status);
  }
  mtc_plan_release(plan);
  free(src);
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
  CHECK_EQ_U64(stats.pinned_allocations, 0);
  CHECK(stats.staging_threads >= 1);
  mtc_trim_pools();
}

int main(void) {
  /* Before the first libmtc call: the driver is loaded once per process. */
  setenv("MTC_CUDA_DRIVER", MISSING_DRIVER, 1);
  setenv("MTC_STAGING_THREADS", "4", 0);
  CHECK(strcmp(mtc_last_error(), "") == 0);
  test_version_and_names();
  test_options();
  test_null_handling();
  for (uint32_t background = 0; background < 2; background++) {
    test_reuse_and_strided(background);
    test_big_strided(background);
  }
  test_leaf_errors();
  test_no_driver();
  test_many_plans();
  test_concurrent_waiters();
  test_stats_zero();
  return check_summary("test_host");
}
