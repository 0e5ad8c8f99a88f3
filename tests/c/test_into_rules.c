/* test_into_rules.c — the rules that copies into existing memory keep
 * (mtc_plan_add_leaves_into), against the emulated driver (path in argv[1]
 * or MTC_CUDA_DRIVER; two devices) or a real GPU (libcuda.so.1):
 *  - aliasing is refused before anything is copied: a destination that is
 *    another leaf's source (a swap, a chain, one shared byte, views into
 *    one block) on the host and on a device;
 *  - host destinations are written only by the caller's poll or wait:
 *    never by mtc_plan_wait_device or mtc_plan_poll_device, by release, or
 *    on behalf of another plan; mtc_plan_skip_copy_out leaves a
 *    destination to a later copy;
 *  - plans land in submission order, whether carried out by the background
 *    thread or on the caller's thread. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helpers.h"
#include "readback.h"

static int32_t device_count;

static mtc_options options_of(uint32_t background) {
  mtc_options options = MTC_OPTIONS_INIT;
  options.use_background_thread = background;
  return options;
}

/* Submits count leaves into dst on target; returns the submit status.
 * Unless kept is not NULL, the plan is waited for and released; a refused
 * plan's error leaf goes to *error_leaf. */
static int64_t error_leaf;
static mtc_status submit_into(const mtc_leaf *leaves, const mtc_leaf *dst, uint64_t count,
                              int32_t target, uint32_t background, mtc_plan **kept) {
  mtc_options options = options_of(background);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &options, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, dst, count));
  mtc_status status = mtc_plan_submit(plan);
  if (kept != NULL && status == MTC_OK) {
    *kept = plan;
  } else {
    if (status == MTC_OK) CHECK_OK(mtc_plan_wait(plan));
    error_leaf = mtc_plan_error_leaf(plan);
    mtc_plan_release(plan);
  }
  return status;
}

/* Device memory of `bytes` on device, filled from `data`, as a block. */
static mtc_block *device_block(int32_t device, const uint8_t *data, uint64_t bytes, uint64_t *address) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(device, bytes, 0, &block));
  mtc_block_info info;
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(block, &info));
  *address = info.address;
  mtc_leaf leaf = make_leaf(host_address(data), bytes, 1, MTC_DEVICE_CPU);
  mtc_leaf dst = make_leaf(info.address, bytes, 1, device);
  CHECK_OK(submit_into(&leaf, &dst, 1, device, 0, NULL));
  return block;
}

/* Leaves a and b of `bytes` each at the two addresses, on `device`. */
static void pair(mtc_leaf *out, uint64_t a, uint64_t b, uint64_t bytes, int32_t device) {
  out[0] = make_leaf(a, bytes, 4, device);
  out[1] = make_leaf(b, bytes, 4, device);
}

/* A swap, a chain, one shared byte and views into one memory range, all
 * refused naming both leaves; apart by one byte, accepted. */
static void aliasing_on(int32_t device, uint64_t base, uint8_t *readback) {
  uint64_t x = base, y = base + 64, z = base + 128;
  mtc_leaf src[2], dst[2];
  for (uint32_t background = 0; background < 2; background++) {
    pair(src, x, y, 64, device);
    pair(dst, y, x, 64, device); /* swap */
    CHECK_STATUS(submit_into(src, dst, 2, device, background, NULL), MTC_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(mtc_last_error(), "leaf 1: its destination overlaps the source of leaf 0");
    CHECK_EQ_U64(error_leaf, 1);
    pair(dst, y, z, 64, device); /* chain: a -> b's source */
    CHECK_STATUS(submit_into(src, dst, 2, device, background, NULL), MTC_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(mtc_last_error(), "leaf 0: its destination overlaps the source of leaf 1");
    CHECK_EQ_U64(error_leaf, 0);
    /* One byte: leaf 1's destination is leaf 0's last source byte. */
    src[0] = make_leaf(x, 64, 4, device);
    dst[0] = make_leaf(z, 64, 4, device);
    src[1] = make_leaf(z + 64, 1, 1, device);
    dst[1] = make_leaf(x + 63, 1, 1, device);
    CHECK_STATUS(submit_into(src, dst, 2, device, background, NULL), MTC_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(mtc_last_error(), "leaf 1: its destination overlaps the source of leaf 0");
    CHECK_EQ_U64(error_leaf, 1);
    dst[1] = make_leaf(x + 64, 1, 1, device); /* one past it: apart */
    CHECK_OK(submit_into(src, dst, 2, device, background, NULL));
  }
  if (readback != NULL) download(device, base, 192, readback);
}

static void test_aliasing(void) {
  uint8_t *host = random_bytes(256);
  uint8_t before[256];
  memcpy(before, host, sizeof before);
  aliasing_on(MTC_DEVICE_CPU, host_address(host), NULL);
  /* Only the last, accepted copy ran: z <- x, byte x+64 <- z+64. */
  CHECK(memcmp(host + 128, before, 64) == 0);
  CHECK(host[64] == before[192]);
  CHECK(memcmp(host, before, 64) == 0);
  free(host);
  for (int32_t device = 0; device < device_count && device < 2; device++) {
    uint64_t address;
    mtc_block *block = device_block(device, before, 256, &address);
    uint8_t back[192];
    aliasing_on(device, address, back);
    CHECK(memcmp(back + 128, before, 64) == 0);
    CHECK(back[64] == before[192]);
    mtc_block_release(block);
  }
}

/* A device -> host copy is written by the caller's poll or wait only. */
static void test_host_writes(void) {
  if (device_count < 1) {
    check_skip("host writes", "no CUDA device");
    return;
  }
  uint8_t *data = random_bytes(4096);
  uint64_t address;
  mtc_block *block = device_block(0, data, 4096, &address);
  uint8_t out[4096], other[4096];
  for (uint32_t background = 0; background < 2; background++) {
    mtc_leaf leaf = make_leaf(address, 4096, 4, 0);
    mtc_leaf dst = make_leaf(host_address(out), 4096, 4, MTC_DEVICE_CPU);
    /* wait_device: the device work is over, the destination untouched. */
    memset(out, 0, sizeof out);
    mtc_plan *plan = NULL;
    CHECK_OK(submit_into(&leaf, &dst, 1, MTC_DEVICE_CPU, background, &plan));
    CHECK_OK(mtc_plan_wait_device(plan));
    CHECK_OK(mtc_plan_poll_device(plan));
    /* Another plan's wait does not write it either. */
    mtc_leaf dst2 = make_leaf(host_address(other), 4096, 4, MTC_DEVICE_CPU);
    mtc_plan *second = NULL;
    CHECK_OK(submit_into(&leaf, &dst2, 1, MTC_DEVICE_CPU, background, &second));
    CHECK_OK(mtc_plan_wait(second));
    CHECK(memcmp(other, data, 4096) == 0);
    mtc_plan_release(second);
    uint8_t zero = 0;
    for (int i = 0; i < 4096; i++) zero |= out[i];
    CHECK(zero == 0);
    CHECK_OK(mtc_plan_poll(plan));
    CHECK(memcmp(out, data, 4096) == 0);
    mtc_plan_release(plan);
    /* Released without poll or wait: never written. */
    memset(out, 0, sizeof out);
    CHECK_OK(submit_into(&leaf, &dst, 1, MTC_DEVICE_CPU, background, &plan));
    CHECK_OK(mtc_plan_wait_device(plan));
    mtc_plan_release(plan);
    zero = 0;
    for (int i = 0; i < 4096; i++) zero |= out[i];
    CHECK(zero == 0);
    /* Host -> host likewise. */
    mtc_leaf host_leaf = make_leaf(host_address(data), 4096, 4, MTC_DEVICE_CPU);
    CHECK_OK(submit_into(&host_leaf, &dst, 1, MTC_DEVICE_CPU, background, &plan));
    CHECK_OK(mtc_plan_wait_device(plan));
    zero = 0;
    for (int i = 0; i < 4096; i++) zero |= out[i];
    CHECK(zero == 0);
    CHECK_OK(mtc_plan_wait(plan));
    CHECK(memcmp(out, data, 4096) == 0);
    mtc_plan_release(plan);
  }
  mtc_block_release(block);
  free(data);
}

/* Two copies into one host destination polled in reverse order: the later
 * one's bytes stay once the earlier plan's leaf is skipped. */
static void test_skip(void) {
  uint8_t *first = random_bytes(512), *second = random_bytes(512);
  uint8_t out[512];
  memset(out, 0, sizeof out);
  mtc_leaf dst = make_leaf(host_address(out), 512, 1, MTC_DEVICE_CPU);
  mtc_leaf a = make_leaf(host_address(first), 512, 1, MTC_DEVICE_CPU);
  mtc_leaf b = make_leaf(host_address(second), 512, 1, MTC_DEVICE_CPU);
  mtc_plan *earlier = NULL, *later = NULL;
  CHECK_OK(submit_into(&a, &dst, 1, MTC_DEVICE_CPU, 1, &earlier));
  CHECK_OK(submit_into(&b, &dst, 1, MTC_DEVICE_CPU, 1, &later));
  CHECK_OK(mtc_plan_skip_copy_out(earlier, 0));
  CHECK_STATUS(mtc_plan_skip_copy_out(earlier, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_plan_wait(later));
  CHECK_OK(mtc_plan_wait(earlier));
  CHECK(memcmp(out, second, 512) == 0);
  mtc_plan_release(earlier);
  mtc_plan_release(later);
  free(first);
  free(second);
}

/* A plan on the caller's thread does not overtake one still queued for
 * the background thread: into one device destination, the later lands. */
static void test_submission_order(void) {
  if (device_count < 1) {
    check_skip("submission order", "no CUDA device");
    return;
  }
  const uint64_t big = (uint64_t)8 << 20;
  uint8_t *old_bytes = random_bytes((size_t)big), *new_bytes = random_bytes(64);
  uint64_t address;
  mtc_block *block = device_block(0, old_bytes, big, &address);
  int wrong = 0;
  for (int round = 0; round < 20; round++) {
    old_bytes[0] = (uint8_t)round;
    new_bytes[0] = (uint8_t)(round + 100);
    mtc_leaf a = make_leaf(host_address(old_bytes), big, 1, MTC_DEVICE_CPU);
    mtc_leaf da = make_leaf(address, big, 1, 0);
    mtc_leaf b = make_leaf(host_address(new_bytes), 64, 1, MTC_DEVICE_CPU);
    mtc_leaf db = make_leaf(address, 64, 1, 0);
    mtc_plan *first = NULL, *second = NULL;
    CHECK_OK(submit_into(&a, &da, 1, 0, 1, &first));
    CHECK_OK(submit_into(&b, &db, 1, 0, 0, &second));
    CHECK_OK(mtc_plan_wait(second));
    CHECK_OK(mtc_plan_wait(first));
    uint8_t back[64];
    download(0, address, 64, back);
    if (memcmp(back, new_bytes, 64) != 0) wrong++;
    mtc_plan_release(first);
    mtc_plan_release(second);
  }
  CHECK_EQ_U64(wrong, 0);
  mtc_block_release(block);
  free(old_bytes);
  free(new_bytes);
}

int main(int argc, char **argv) {
  driver_argument(argc, argv, "test_into_rules");
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  if (mtc_cuda_device_count(&device_count) != MTC_OK) device_count = 0;
  test_aliasing();
  test_host_writes();
  test_skip();
  test_submission_order();
  return check_summary("test_into_rules");
}
