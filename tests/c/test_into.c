/* test_into.c — mtc_plan_add_leaves_into: copies into memory that already
 * exists, every direction, byte-exact, against the emulated driver
 * (libfakecuda.so, path in argv[1] or MTC_CUDA_DRIVER; two devices), or a
 * real GPU with no argument. Device memory is read back with plain plans,
 * so the checks hold on either. Destinations are views into one block (the
 * results of one packed copy) or blocks of their own. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"
#include "readback.h"

static unsigned long long (*kernel_launches)(void);
static int32_t device_count;

static unsigned long long launches(void) {
  return kernel_launches ? kernel_launches() : 0;
}

/* The leaves of one test: sizes from 1 byte to past the packing threshold,
 * every element size. */
#define LEAVES 9
static const uint64_t leaf_bytes[LEAVES] = {1, 6, 64, 100, 4096, 12, 300 << 10, 16, 40000};
static const uint32_t leaf_element[LEAVES] = {1, 2, 4, 4, 8, 2, 4, 16, 8};

static mtc_options options_of(uint32_t background, uint32_t pinned) {
  mtc_options options = MTC_OPTIONS_INIT;
  options.use_background_thread = background;
  options.use_pinned_staging = pinned;
  return options;
}

/* Runs a plain plan of count host leaves to device and returns it (the
 * caller releases it); results to out. no_pack: one block per leaf. */
static mtc_plan *upload(int32_t device, uint8_t **data, uint64_t count, int no_pack,
                        mtc_leaf_result *out) {
  mtc_leaf leaves[LEAVES];
  for (uint64_t i = 0; i < count; i++) {
    leaves[i] = make_leaf(host_address(data[i]), leaf_bytes[i], leaf_element[i], MTC_DEVICE_CPU);
    if (no_pack) leaves[i].flags = MTC_LEAF_NO_PACK;
  }
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(device, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, count, out));
  return plan;
}

static uint8_t **random_leaves(void) {
  uint8_t **data = malloc(LEAVES * sizeof *data);
  for (int i = 0; i < LEAVES; i++) data[i] = random_bytes((size_t)leaf_bytes[i]);
  return data;
}

static uint8_t **zero_leaves(void) {
  uint8_t **data = malloc(LEAVES * sizeof *data);
  for (int i = 0; i < LEAVES; i++) data[i] = calloc(1, (size_t)leaf_bytes[i]);
  return data;
}

static void free_leaves(uint8_t **data) {
  for (int i = 0; i < LEAVES; i++) free(data[i]);
  free(data);
}

/* Copies sources (on source_device, described by their addresses) into
 * destinations (on target) with one plan, and checks the results. */
static void copy_into(int32_t source_device, const uint64_t *sources, int32_t target,
                      const uint64_t *destinations, const mtc_options *options) {
  mtc_leaf leaves[LEAVES], dst[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(sources[i], leaf_bytes[i], leaf_element[i], source_device);
    dst[i] = make_leaf(destinations[i], leaf_bytes[i], leaf_element[i], target);
  }
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, options, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, dst, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result results[LEAVES];
  CHECK_OK(mtc_plan_results(plan, 0, LEAVES, results));
  for (int i = 0; i < LEAVES; i++) {
    CHECK_EQ_U64(results[i].address, destinations[i]);
    CHECK(results[i].block == NULL);
    CHECK(results[i].flags == MTC_RESULT_INTO);
  }
  mtc_plan_release(plan);
}

/* Every destination holds its source's bytes. */
static void check_device_holds(int32_t device, const mtc_leaf_result *dst, uint8_t **expected) {
  for (int i = 0; i < LEAVES; i++) {
    uint8_t *back = malloc((size_t)leaf_bytes[i]);
    download(device, dst[i].address, leaf_bytes[i], back);
    CHECK(memcmp(back, expected[i], (size_t)leaf_bytes[i]) == 0);
    free(back);
  }
}

/* host -> device, into views of one block and into blocks of their own. */
static void test_host_to_device(uint32_t background, uint32_t pinned) {
  for (int separate = 0; separate < 2; separate++) {
    uint8_t **zeros = zero_leaves(), **data = random_leaves();
    mtc_leaf_result dst[LEAVES];
    mtc_plan *made = upload(0, zeros, LEAVES, separate, dst);
    if (!separate) CHECK(dst[0].block == dst[1].block);
    uint64_t sources[LEAVES], destinations[LEAVES];
    for (int i = 0; i < LEAVES; i++) {
      sources[i] = host_address(data[i]);
      destinations[i] = dst[i].address;
    }
    mtc_options options = options_of(background, pinned);
    unsigned long long before = launches();
    copy_into(MTC_DEVICE_CPU, sources, 0, destinations, &options);
    /* Packed leaves are placed by one scatter launch (with kernels). */
    if (kernel_launches && mtc_has_kernels()) CHECK_EQ_U64(launches() - before, 1);
    check_device_holds(0, dst, data);
    mtc_plan_release(made);
    free_leaves(zeros);
    free_leaves(data);
  }
}

/* device (source) -> device (target), same device or another. */
static void test_device_to_device(int32_t source, int32_t target, uint32_t background) {
  uint8_t **zeros = zero_leaves(), **data = random_leaves();
  mtc_leaf_result src[LEAVES], dst[LEAVES];
  mtc_plan *sources_plan = upload(source, data, LEAVES, 0, src);
  mtc_plan *made = upload(target, zeros, LEAVES, 1, dst);
  uint64_t sources[LEAVES], destinations[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    sources[i] = src[i].address;
    destinations[i] = dst[i].address;
  }
  mtc_options options = options_of(background, 1);
  copy_into(source, sources, target, destinations, &options);
  check_device_holds(target, dst, data);
  mtc_plan_release(made);
  mtc_plan_release(sources_plan);
  free_leaves(zeros);
  free_leaves(data);
}

/* device -> host, and host -> host, into malloc'd arrays. */
static void test_to_host(int32_t source, uint32_t background) {
  uint8_t **data = random_leaves(), **out = zero_leaves();
  mtc_leaf_result src[LEAVES];
  mtc_plan *sources_plan = source >= 0 ? upload(source, data, LEAVES, 0, src) : NULL;
  uint64_t sources[LEAVES], destinations[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    sources[i] = source >= 0 ? src[i].address : host_address(data[i]);
    destinations[i] = host_address(out[i]);
  }
  mtc_options options = options_of(background, 1);
  copy_into(source, sources, MTC_DEVICE_CPU, destinations, &options);
  for (int i = 0; i < LEAVES; i++) {
    CHECK(memcmp(out[i], data[i], (size_t)leaf_bytes[i]) == 0);
  }
  mtc_plan_release(sources_plan);
  free_leaves(data);
  free_leaves(out);
}

/* A plan of two leaves whose add or submit must fail, naming leaf 1. */
static void expect_rejected(mtc_leaf *leaves, mtc_leaf *dst, int32_t target,
                            int at_submit, const char *text) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, NULL, &plan));
  mtc_status added = mtc_plan_add_leaves_into(plan, leaves, dst, 2);
  if (at_submit) {
    CHECK_OK(added);
    CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_ARGUMENT);
  } else {
    CHECK(added != MTC_OK);
    CHECK_EQ_U64(mtc_plan_leaf_count(plan), 0);
  }
  CHECK_CONTAINS(mtc_last_error(), text);
  CHECK_EQ_U64(mtc_plan_error_leaf(plan), 1);
  mtc_plan_release(plan);
}

static void test_errors(void) {
  uint8_t a[64], b[64], out[128];
  memset(out, 7, sizeof out);
  mtc_leaf leaves[2] = {make_leaf(host_address(a), 64, 4, MTC_DEVICE_CPU),
                        make_leaf(host_address(b), 64, 4, MTC_DEVICE_CPU)};
  mtc_leaf dst[2] = {make_leaf(host_address(out), 64, 4, MTC_DEVICE_CPU),
                     make_leaf(host_address(out + 64), 64, 4, MTC_DEVICE_CPU)};

  dst[1].bytes = 32;
  expect_rejected(leaves, dst, MTC_DEVICE_CPU, 0, "destination holds 32 bytes but the leaf has 64");
  dst[1].bytes = 64;
  dst[1].element_size = 8;
  expect_rejected(leaves, dst, MTC_DEVICE_CPU, 0, "8-byte elements");
  dst[1].element_size = 4;
  dst[1].address = host_address(out + 32); /* overlaps dst[0] */
  expect_rejected(leaves, dst, MTC_DEVICE_CPU, 1, "overlaps the destination of leaf 0");
  dst[1].address = host_address(b + 8); /* overlaps its own source */
  expect_rejected(leaves, dst, MTC_DEVICE_CPU, 1, "overlaps the leaf itself");
  dst[1].address = host_address(out + 64);
  for (int i = 0; i < 128; i++) CHECK(out[i] == 7); /* nothing was copied */
  dst[1].device = 0;
  expect_rejected(leaves, dst, MTC_DEVICE_CPU, 0, "destination is in cuda:0 but the plan copies to host memory");
  dst[1].device = MTC_DEVICE_CPU;

  /* Leaves with and without destinations do not mix. */
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, dst, 1));
  CHECK_STATUS(mtc_plan_add_leaves(plan, leaves, 1), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "cannot be mixed");
  CHECK_STATUS(mtc_plan_add_leaves_into(plan, leaves, NULL, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK(memcmp(out, a, 64) == 0);
  mtc_plan_release(plan);
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, 1));
  CHECK_STATUS(mtc_plan_add_leaves_into(plan, leaves, dst, 1), MTC_ERR_INVALID_STATE);
  mtc_plan_release(plan);
}

/* A strided source's own span is its layout's reach, not its bytes: a
 * broadcast leaf (stride 0) reaches one element, so a destination right
 * after that element is apart from it; a step slice reaches past its bytes,
 * so a destination inside that reach overlaps it. */
static void test_strided_source_overlap(void) {
  uint32_t buffer[16];
  for (uint32_t k = 0; k < 16; k++) buffer[k] = 100 + k;
  mtc_leaf_layout broadcast = {sizeof(mtc_leaf_layout), 1, {8}, {0}};
  mtc_leaf leaf = make_leaf(host_address(buffer), 32, 4, MTC_DEVICE_CPU);
  mtc_leaf dst = make_leaf(host_address(buffer + 1), 32, 4, MTC_DEVICE_CPU);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, &leaf, &dst, 1));
  CHECK_OK(mtc_plan_set_leaf_layout(plan, 0, &broadcast));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  for (uint32_t k = 1; k <= 8; k++) CHECK_EQ_U64(buffer[k], 100);
  mtc_plan_release(plan);

  mtc_leaf_layout step = {sizeof(mtc_leaf_layout), 1, {4}, {8}}; /* elements 0, 2, 4, 6 */
  leaf.bytes = 16;
  dst = make_leaf(host_address(buffer + 5), 16, 4, MTC_DEVICE_CPU); /* past 16 bytes, inside the reach */
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, &leaf, &dst, 1));
  CHECK_OK(mtc_plan_set_leaf_layout(plan, 0, &step));
  CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "overlaps the leaf itself");
  mtc_plan_release(plan);
}

/* mtc_plan_stop_reading before a device -> host copy completes: the copy
 * out into the host destinations does not run, and the plan fails. */
static void test_stop_before_copy_out(void) {
  uint8_t **data = random_leaves(), **out = zero_leaves();
  mtc_leaf_result src[LEAVES];
  mtc_plan *sources_plan = upload(0, data, LEAVES, 0, src);
  mtc_leaf leaves[LEAVES], dst[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(src[i].address, leaf_bytes[i], leaf_element[i], 0);
    dst[i] = make_leaf(host_address(out[i]), leaf_bytes[i], leaf_element[i], MTC_DEVICE_CPU);
  }
  mtc_options options = options_of(0, 1);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &options, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, dst, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_stop_reading(plan, 1000));
  CHECK_STATUS(mtc_plan_wait(plan), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "mtc_plan_stop_reading");
  for (int i = 0; i < LEAVES; i++) {
    uint8_t zero = 0;
    for (uint64_t b = 0; b < leaf_bytes[i]; b++) zero |= out[i][b];
    CHECK(zero == 0);
  }
  mtc_plan_release(plan);
  mtc_plan_release(sources_plan);
  free_leaves(data);
  free_leaves(out);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, "test_into");
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("MTC_STAGING_THREADS", "4", 0);
  if (driver != NULL) {
    void *fake = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
    if (fake != NULL) FAKE_SYM(fake, kernel_launches, "fake_cuda_kernel_launches");
  }
  if (mtc_cuda_device_count(&device_count) != MTC_OK) device_count = 0;
  test_errors();
  test_strided_source_overlap();
  for (uint32_t background = 0; background < 2; background++) {
    test_to_host(MTC_DEVICE_CPU, background);
    if (device_count < 1) continue;
    test_host_to_device(background, 1);
    test_host_to_device(background, 0);
    test_device_to_device(0, 0, background);
    test_to_host(0, background);
    if (device_count > 1) test_device_to_device(1, 0, background);
  }
  if (device_count > 0) test_stop_before_copy_out();
  return check_summary("test_into");
}
