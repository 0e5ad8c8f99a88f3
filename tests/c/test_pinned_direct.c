/* test_pinned_direct.c — host leaves in the library's pinned memory
 * (mtc_host_block_alloc, MTC_LEAF_PINNED) go to the device by DMA from
 * where they lie, against the emulated driver (its path in argv[1]):
 * neighbours share one DMA and keep their distances, a batch that mixes
 * pinned and pageable leaves at odd sizes stages only the pageable ones,
 * the block stays busy until the copy is over and alive while a copy holds
 * it, and the held limit is its own. */
#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"
#include "readback.h"

#define SUITE "test_pinned_direct"

static uint64_t block_address(mtc_block *block) {
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(block, &info));
  CHECK(info.pinned == 1 && info.device == MTC_DEVICE_CPU);
  return info.address;
}

static mtc_plan_stats plan_stats(const mtc_plan *plan) {
  mtc_plan_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_OK(mtc_plan_get_stats(plan, &s));
  return s;
}

/* Every result's device bytes equal its leaf's host bytes. */
static void check_results(const mtc_leaf *leaves, const mtc_leaf_result *results, uint64_t count) {
  for (uint64_t i = 0; i < count; i++) {
    if (leaves[i].bytes == 0) continue;
    uint8_t *back = malloc(leaves[i].bytes);
    download(0, results[i].address, leaves[i].bytes, back);
    int same = memcmp(back, (const void *)(uintptr_t)leaves[i].address, leaves[i].bytes) == 0;
    if (!same) fprintf(stderr, "leaf %llu differs\n", (unsigned long long)i);
    CHECK(same);
    free(back);
  }
}

/* Leaves laid out in one pinned block as an arena would: one DMA, one
 * device block, offsets as on the host. */
static void arena_batch(void) {
  mtc_block *arena = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 100000, &arena));
  if (arena == NULL) return;
  uint64_t base = block_address(arena);
  uint8_t *fill = random_bytes(100000);
  memcpy((void *)(uintptr_t)base, fill, 100000);
  free(fill);
  enum { N = 40 };
  mtc_leaf leaves[N];
  uint64_t at = 0;
  for (int i = 0; i < N; i++) {
    uint32_t element = (uint32_t)1 << (i % 4);
    uint64_t bytes = (uint64_t)element * (uint64_t)(1 + (i * 37) % 301);
    at = (at + 15) / 16 * 16;
    leaves[i] = make_leaf(base + at, bytes, element, MTC_DEVICE_CPU);
    leaves[i].flags = MTC_LEAF_PINNED;
    at += bytes;
  }
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK(mtc_block_busy(arena) == 1 || mtc_plan_poll(plan) == MTC_OK);
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result results[N];
  CHECK_OK(mtc_plan_results(plan, 0, N, results));
  for (int i = 0; i < N; i++) {
    CHECK(results[i].flags == (MTC_RESULT_PACKED | MTC_RESULT_DIRECT));
    CHECK(results[i].block == results[0].block);
    CHECK_EQ_U64(results[i].address - results[0].address, leaves[i].address - leaves[0].address);
    CHECK_EQ_U64(results[i].address % 16, leaves[i].address % 16);
  }
  mtc_plan_stats s = plan_stats(plan);
  CHECK_EQ_U64(s.leaves_direct, N);
  CHECK_EQ_U64(s.bytes_staged, 0);
  CHECK_EQ_U64(s.copies_issued, 1);
  CHECK_EQ_U64(s.chunks, 1);
  check_results(leaves, results, N);
  mtc_plan_release(plan);
  CHECK(mtc_block_busy(arena) == 0);
  mtc_block_release(arena);
}

/* Pinned leaves (two blocks, far apart in one of them) among pageable ones
 * and strided-looking rows, odd sizes and alignments: byte-exact, and only
 * the pageable ones staged. */
static void mixed_batch(void) {
  mtc_block *a = NULL, *b = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 1 << 20, &a));
  CHECK_OK(mtc_host_block_alloc(0, 3000, &b));
  if (a == NULL || b == NULL) return;
  uint8_t *pa = (uint8_t *)(uintptr_t)block_address(a), *pb = (uint8_t *)(uintptr_t)block_address(b);
  uint8_t *r = random_bytes(1 << 20);
  memcpy(pa, r, 1 << 20);
  memcpy(pb, r + 5, 3000);
  uint8_t *pageable = random_bytes(50000);
  mtc_leaf leaves[9] = {
      make_leaf(host_address(pa + 3), 1, 1, MTC_DEVICE_CPU),
      make_leaf(host_address(pageable + 1), 777, 1, MTC_DEVICE_CPU),
      make_leaf(host_address(pa + 900000), 60002, 2, MTC_DEVICE_CPU), /* far: a run of its own */
      make_leaf(host_address(pb + 8), 2984, 8, MTC_DEVICE_CPU),
      make_leaf(host_address(pageable + 4000), 40000, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(pa + 17), 13, 1, MTC_DEVICE_CPU),
      make_leaf(host_address(pa + 4), 0, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(pa + 64), 4096, 4, MTC_DEVICE_CPU),
      make_leaf(host_address(pb + 2990), 10, 2, MTC_DEVICE_CPU), /* past b's end: staged */
  };
  uint64_t staged_expected = 777 + 40000;
  for (int i = 0; i < 9; i++) leaves[i].flags = MTC_LEAF_PINNED;
  leaves[1].flags = 0;
  /* b is 3000 bytes asked, its block says so: 2990 + 10 is inside. */
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, 9));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_leaf_result results[9];
  CHECK_OK(mtc_plan_results(plan, 0, 9, results));
  mtc_plan_stats s = plan_stats(plan);
  CHECK_EQ_U64(s.leaves_direct, 6);
  CHECK_EQ_U64(s.bytes_staged, staged_expected);
  CHECK(!(results[1].flags & MTC_RESULT_DIRECT) && !(results[4].flags & MTC_RESULT_DIRECT));
  CHECK(results[0].block == results[5].block && results[0].block == results[7].block);
  CHECK(results[2].block != results[0].block);
  CHECK(results[3].block == results[8].block);
  check_results(leaves, results, 9);
  mtc_plan_release(plan);
  free(pageable);
  free(r);
  mtc_block_release(a);
  mtc_block_release(b);
}

/* The copy holds the block: released by its owner right after submit, the
 * memory stays until the copy is over. Busy until then. */
static void held_by_copy(void (*set_delay)(unsigned long long)) {
  mtc_stats before = checked_stats();
  mtc_block *block = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 70000, &block));
  if (block == NULL) return;
  uint8_t *p = (uint8_t *)(uintptr_t)block_address(block);
  memset(p, 0x5A, 70000);
  mtc_leaf leaf = make_leaf(host_address(p), 70000, 1, MTC_DEVICE_CPU);
  leaf.flags = MTC_LEAF_PINNED;
  set_delay(30000);
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = 0;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, &leaf, 1));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK(mtc_block_busy(block) == 1);
  mtc_block_retain(block);
  mtc_block_release(block); /* the owner's two references: one left */
  CHECK(checked_stats().pinned_held_bytes > before.pinned_held_bytes);
  mtc_block_release(block); /* the owner's last: the plan still holds it */
  CHECK(checked_stats().pinned_held_bytes > before.pinned_held_bytes);
  CHECK_STATUS(mtc_plan_poll(plan), MTC_IN_PROGRESS);
  CHECK_OK(mtc_plan_wait(plan));
  set_delay(0);
  mtc_plan_release(plan);
  CHECK_EQ_U64(checked_stats().pinned_held_bytes, before.pinned_held_bytes);
}

/* Busy from submit to the end of the copy, whoever polls; wait_idle waits. */
static void busy_until_done(void (*set_delay)(unsigned long long)) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 4096, &block));
  if (block == NULL) return;
  CHECK(mtc_block_busy(block) == 0);
  mtc_leaf leaf = make_leaf(block_address(block), 4096, 4, MTC_DEVICE_CPU);
  leaf.flags = MTC_LEAF_PINNED;
  set_delay(20000);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, &leaf, 1));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK(mtc_block_busy(block) == 1);
  CHECK_OK(mtc_block_wait_idle(block));
  CHECK(mtc_block_busy(block) == 0);
  CHECK_OK(mtc_plan_poll(plan));
  set_delay(0);
  mtc_plan_release(plan);
  CHECK(mtc_block_busy(NULL) == 0);
  CHECK_STATUS(mtc_block_wait_idle(NULL), MTC_ERR_INVALID_ARGUMENT);
  mtc_block_release(block);
}

/* Device leaves copied into destinations in a pinned block: written in
 * place (results DIRECT, nothing staged, no copy-out), packed ones by one
 * gather and a large one by a DMA; exact. */
static void into_pinned(void) {
  enum { N = 12 };
  uint8_t *host = random_bytes(600000);
  mtc_leaf up[N];
  uint64_t at = 0;
  for (int i = 0; i < N; i++) {
    uint64_t bytes = i == N - 1 ? 400000 : (uint64_t)(1 + i * 97);
    up[i] = make_leaf(host_address(host + at), bytes, 1, MTC_DEVICE_CPU);
    at += bytes + 3;
  }
  mtc_plan *plan = NULL;
  mtc_leaf_result on_device[N];
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, up, N));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, N, on_device));
  mtc_block *arena = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 700000, &arena));
  if (arena == NULL) return;
  uint64_t base = block_address(arena);
  memset((void *)(uintptr_t)base, 0, 700000);
  mtc_leaf sources[N], destinations[N];
  at = 0;
  for (int i = 0; i < N; i++) {
    sources[i] = make_leaf(on_device[i].address, up[i].bytes, 1, 0);
    at = (at + 15) / 16 * 16;
    destinations[i] = make_leaf(base + at, up[i].bytes, 1, MTC_DEVICE_CPU);
    destinations[i].flags = MTC_LEAF_PINNED;
    at += up[i].bytes;
  }
  mtc_plan *into = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &into));
  CHECK_OK(mtc_plan_add_leaves_into(into, sources, destinations, N));
  CHECK_OK(mtc_plan_submit(into));
  CHECK(mtc_block_busy(arena) == 1 || mtc_plan_poll(into) == MTC_OK);
  CHECK_OK(mtc_plan_wait(into));
  mtc_leaf_result results[N];
  CHECK_OK(mtc_plan_results(into, 0, N, results));
  mtc_plan_stats s = plan_stats(into);
  CHECK_EQ_U64(s.leaves_direct, N);
  CHECK_EQ_U64(s.bytes_staged, 0);
  for (int i = 0; i < N; i++) {
    CHECK(results[i].flags & MTC_RESULT_DIRECT);
    CHECK(memcmp((const void *)(uintptr_t)destinations[i].address,
                 (const void *)(uintptr_t)up[i].address, up[i].bytes) == 0);
  }
  mtc_plan_release(into);
  mtc_plan_release(plan);
  CHECK(mtc_block_busy(arena) == 0);
  mtc_block_release(arena);
  free(host);
}

/* A one-leaf copy of `bytes` from `host` to `device`; its result's address. */
static uint64_t upload(int32_t device, const uint8_t *host, uint64_t bytes, mtc_plan **keep) {
  mtc_leaf leaf = make_leaf(host_address(host), bytes, 1, MTC_DEVICE_CPU);
  mtc_leaf_result result;
  CHECK_OK(mtc_plan_create(device, NULL, keep));
  CHECK_OK(mtc_plan_add_leaves(*keep, &leaf, 1));
  CHECK_OK(mtc_plan_submit(*keep));
  CHECK_OK(mtc_plan_wait(*keep));
  CHECK_OK(mtc_plan_results(*keep, 0, 1, &result));
  return result.address;
}

/* Two copies into one pinned destination from two devices, the first slow:
 * the second's GPU work waits for the first (submission order across
 * streams), so it cannot complete before it, and the bytes are the
 * second's. */
static void ordered_across_devices(void (*set_delay)(unsigned long long)) {
  int32_t devices = 0;
  CHECK_OK(mtc_cuda_device_count(&devices));
  if (devices < 2) {
    check_skip("ordered across devices", "needs two devices");
    return;
  }
  enum { BYTES = 100000 };
  uint8_t *a = random_bytes(BYTES), *b = random_bytes(BYTES);
  mtc_plan *keep_a, *keep_b;
  uint64_t on1 = upload(1, a, BYTES, &keep_a), on0 = upload(0, b, BYTES, &keep_b);
  mtc_block *x = NULL;
  CHECK_OK(mtc_host_block_alloc(0, BYTES, &x));
  if (x == NULL) return;
  mtc_leaf dst = make_leaf(block_address(x), BYTES, 1, MTC_DEVICE_CPU);
  dst.flags = MTC_LEAF_PINNED;
  mtc_leaf from1 = make_leaf(on1, BYTES, 1, 1), from0 = make_leaf(on0, BYTES, 1, 0);
  mtc_plan *first, *second;
  mtc_options here = MTC_OPTIONS_INIT;
  here.use_background_thread = 0; /* enqueued with the delay before submit returns */
  set_delay(60000);
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &here, &first));
  CHECK_OK(mtc_plan_add_leaves_into(first, &from1, &dst, 1));
  CHECK_OK(mtc_plan_submit(first));
  set_delay(0);
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &second));
  CHECK_OK(mtc_plan_add_leaves_into(second, &from0, &dst, 1));
  CHECK_OK(mtc_plan_submit(second));
  CHECK_OK(mtc_plan_wait_device(second));
  CHECK_STATUS(mtc_plan_poll_device(first), MTC_OK); /* the second waited for it */
  CHECK_OK(mtc_plan_wait(first));
  CHECK_OK(mtc_plan_wait(second));
  CHECK(memcmp((const void *)(uintptr_t)block_address(x), b, BYTES) == 0);
  mtc_plan_release(first);
  mtc_plan_release(second);
  mtc_plan_release(keep_a);
  mtc_plan_release(keep_b);
  mtc_block_release(x);
  free(a);
  free(b);
}

/* The held limit is its own and its message names it. */
static void held_limit(void) {
  CHECK_STATUS(mtc_set_pinned_held_limit(1000), MTC_ERR_INVALID_ARGUMENT);
  CHECK_OK(mtc_set_pinned_held_limit((uint64_t)1 << 20));
  CHECK_EQ_U64(checked_stats().pinned_held_limit_bytes, (uint64_t)1 << 20);
  mtc_block *a = NULL, *b = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 600000, &a));
  CHECK_STATUS(mtc_host_block_alloc(0, 600000, &b), MTC_ERR_OUT_OF_MEMORY);
  CHECK(b == NULL);
  CHECK_CONTAINS(mtc_last_error(), "MTC_PINNED_HELD_LIMIT");
  CHECK_STATUS(mtc_host_block_alloc(0, 0, &b), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_host_block_alloc(-1, 10, &b), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_host_block_alloc(7, 10, &b), MTC_ERR_NO_DEVICE);
  mtc_block_release(a);
  CHECK_OK(mtc_host_block_alloc(0, 600000, &b));
  mtc_block_release(b);
  CHECK_OK(mtc_set_pinned_held_limit((uint64_t)1 << 33));
}

/* A copy into host destinations that reads a pinned block at its
 * copy-out (host -> host): busy until the poll or wait that copies out,
 * not only until submit, or until its release; mtc_block_wait_idle cannot
 * wait for that poll and says so. */
static void busy_until_copied_out(void) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 4096, &block));
  if (block == NULL) return;
  uint64_t base = block_address(block);
  memset((void *)(uintptr_t)base, 0x3C, 4096);
  uint8_t out[4096];
  mtc_leaf source = make_leaf(base, 4096, 1, MTC_DEVICE_CPU);
  source.flags = MTC_LEAF_PINNED;
  mtc_leaf destination = make_leaf(host_address(out), 4096, 1, MTC_DEVICE_CPU);
  for (int released = 0; released < 2; released++) {
    memset(out, 0, sizeof out);
    mtc_plan *plan = NULL;
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
    CHECK_OK(mtc_plan_add_leaves_into(plan, &source, &destination, 1));
    CHECK_OK(mtc_plan_submit(plan));
    CHECK(mtc_block_busy(block) == 1);
    CHECK_STATUS(mtc_block_wait_idle(block), MTC_IN_PROGRESS);
    CHECK(mtc_block_busy(block) == 1);
    if (!released) {
      CHECK_OK(mtc_plan_wait(plan));
      CHECK(memcmp(out, (const void *)(uintptr_t)base, sizeof out) == 0);
      CHECK(mtc_block_busy(block) == 0); /* copied out: idle before the release */
    }
    mtc_plan_release(plan);
    CHECK(mtc_block_busy(block) == 0);
    CHECK_OK(mtc_block_wait_idle(block));
  }
  mtc_block_release(block);
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 0);
  void *handle = fake_open(getenv("MTC_CUDA_DRIVER"));
  void (*set_delay)(unsigned long long) = NULL;
  if (handle != NULL) FAKE_SYM(handle, set_delay, "fake_cuda_set_copy_delay_us");
  mtc_stats start = checked_stats();
  arena_batch();
  mixed_batch();
  if (set_delay != NULL) {
    held_by_copy(set_delay);
    busy_until_done(set_delay);
    ordered_across_devices(set_delay);
  } else {
    check_skip("the copy-delay cases", "needs the emulated driver's fake_cuda_set_copy_delay_us");
  }
  into_pinned();
  busy_until_copied_out();
  held_limit();
  mtc_stats end = checked_stats();
  CHECK_EQ_U64(end.blocks_live, start.blocks_live);
  CHECK_EQ_U64(end.pinned_held_bytes, 0);
  CHECK_EQ_U64(end.plans_live, 0);
  return check_summary(SUITE);
}
