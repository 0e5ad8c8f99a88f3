/* test_pinned_order.c — a copy that uses a pinned block of the library's
 * first makes its GPU work wait for the copies that used the block before
 * it, whichever device's stream they ran on (the block's completion
 * events: mtc_block_order_after_uses, through
 * mtc_transfer_order_after_pinned). One scenario per call site:
 *
 *   to_device   a host -> device copy reads pinned leaves in place
 *               (run/to_device.c, direct_chunk)
 *   completion  a copy into a pinned destination that the copy-out writes
 *               once the copy completed (run/transfer.c)
 *   gather      a gather launch writes pinned destinations in place
 *               (run/into_host.c, mtc_into_direct_gather)
 *   leaf        a device -> host DMA writes a pinned destination in place
 *               (run/into_host.c, mtc_into_direct_leaf)
 *
 * In each, an earlier copy on cuda:1 uses pinned block X for a modelled
 * second (the emulated driver's copy delay), then the copy under test uses
 * X from cuda:0. The emulated driver's race check (fake_races.c) fails a
 * DMA or kernel that touches X while the earlier one still does, with no
 * event between them: without the wait, that is the copy under test,
 * every time. The copy-out is the caller's own memcpy, which the driver
 * cannot see: there, without the wait, the copy completes before the
 * earlier one, and the test sees that. Against the emulated driver only
 * (its path in argv[1]); elsewhere it says it skipped. */
#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"
#include "readback.h"

#define SUITE "test_pinned_order"

enum { BYTES = 65536, LEAVES = 8 };

/* The earlier copy's modelled time: far longer than the few microseconds
 * between it and the copy under test, on any machine. */
#define SLOW_US 1000000ull

static struct {
  void (*set_copy_delay_us)(unsigned long long);
  void (*check_races)(int);
  unsigned long long (*race_count)(void);
} fake;

static uint64_t block_address(mtc_block *block) {
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(block, &info));
  return info.address;
}

static mtc_plan_stats plan_stats(const mtc_plan *plan) {
  mtc_plan_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_OK(mtc_plan_get_stats(plan, &s));
  return s;
}

/* `bytes` bytes of `host` copied to `device`; the plan that holds them. */
static uint64_t upload(int32_t device, const uint8_t *host, uint64_t bytes, mtc_plan **keep) {
  mtc_leaf leaf = make_leaf(host_address(host), bytes, 1, MTC_DEVICE_CPU);
  mtc_leaf_result result;
  memset(&result, 0, sizeof result);
  CHECK_OK(mtc_plan_create(device, NULL, keep));
  CHECK_OK(mtc_plan_add_leaves(*keep, &leaf, 1));
  CHECK_OK(mtc_plan_submit(*keep));
  CHECK_OK(mtc_plan_wait(*keep));
  CHECK_OK(mtc_plan_results(*keep, 0, 1, &result));
  return result.address;
}

/* A pinned leaf or destination: `bytes` bytes at `address` in X. */
static mtc_leaf pinned_leaf(uint64_t address, uint64_t bytes) {
  mtc_leaf leaf = make_leaf(address, bytes, 1, MTC_DEVICE_CPU);
  leaf.flags = MTC_LEAF_PINNED;
  return leaf;
}

/* The earlier use of X: a plan to `target` (MTC_DEVICE_CPU for a copy
 * into `dst`) carried out on the calling thread, each of its copies taking
 * SLOW_US of modelled time. */
static mtc_plan *slow_copy(int32_t target, const mtc_leaf *src, const mtc_leaf *dst, uint64_t count) {
  mtc_options here = MTC_OPTIONS_INIT;
  here.use_background_thread = 0; /* queued with the delay before submit returns */
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &here, &plan));
  if (dst != NULL) CHECK_OK(mtc_plan_add_leaves_into(plan, src, dst, count));
  else CHECK_OK(mtc_plan_add_leaves(plan, src, count));
  fake.set_copy_delay_us(SLOW_US);
  CHECK_OK(mtc_plan_submit(plan));
  fake.set_copy_delay_us(0);
  CHECK_STATUS(mtc_plan_poll_device(plan), MTC_IN_PROGRESS);
  return plan;
}

/* The copy under test is over: it waited for the earlier one, raced
 * nothing, and the earlier one is over too. */
static void check_ordered(const char *site, mtc_plan *earlier, mtc_plan *later, unsigned long long races) {
  mtc_status status = mtc_plan_wait(later);
  if (status != MTC_OK) printf("%s: %s\n", site, mtc_plan_last_error(later));
  CHECK_OK(status);
  CHECK_EQ_U64(fake.race_count(), races);
  CHECK_STATUS(mtc_plan_poll_device(earlier), MTC_OK);
}

/* to_device: cuda:1 writes X (a DMA into a pinned destination), then a
 * copy to cuda:0 reads X where it lies. */
static void site_to_device(mtc_block *x, const uint8_t *bytes, uint64_t on1) {
  unsigned long long races = fake.race_count();
  mtc_leaf from1 = make_leaf(on1, BYTES, 1, 1), into_x = pinned_leaf(block_address(x), BYTES);
  mtc_plan *earlier = slow_copy(MTC_DEVICE_CPU, &from1, &into_x, 1);
  mtc_plan *later = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &later));
  CHECK_OK(mtc_plan_add_leaves(later, &into_x, 1));
  CHECK_OK(mtc_plan_submit(later));
  check_ordered("to_device", earlier, later, races);
  mtc_leaf_result result;
  memset(&result, 0, sizeof result);
  mtc_status status = mtc_plan_results(later, 0, 1, &result);
  CHECK_OK(status);
  CHECK(result.flags & MTC_RESULT_DIRECT); /* read in place: the path under test */
  CHECK_EQ_U64(plan_stats(later).bytes_staged, 0);
  if (status == MTC_OK) {
    uint8_t *back = malloc(BYTES);
    download(0, result.address, BYTES, back);
    CHECK(memcmp(back, bytes, BYTES) == 0);
    free(back);
  }
  mtc_plan_release(later);
  mtc_plan_release(earlier);
}

/* leaf: cuda:1 reads X in place, then cuda:0 writes one leaf into X. */
static void site_leaf(mtc_block *x, const uint8_t *bytes, uint64_t on0) {
  unsigned long long races = fake.race_count();
  mtc_leaf x_leaf = pinned_leaf(block_address(x), BYTES);
  mtc_plan *earlier = slow_copy(1, &x_leaf, NULL, 1);
  mtc_leaf from0 = make_leaf(on0, BYTES, 1, 0);
  mtc_plan *later = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &later));
  CHECK_OK(mtc_plan_add_leaves_into(later, &from0, &x_leaf, 1));
  CHECK_OK(mtc_plan_submit(later));
  check_ordered("leaf", earlier, later, races);
  mtc_plan_stats s = plan_stats(later);
  CHECK_EQ_U64(s.leaves_direct, 1);
  CHECK(s.device_to_host_path == MTC_PATH_PER_LEAF);
  CHECK(memcmp((const void *)(uintptr_t)block_address(x), bytes, BYTES) == 0);
  mtc_plan_release(later);
  mtc_plan_release(earlier);
}

/* gather: cuda:1 reads X in place, then one gather launch on cuda:0
 * writes LEAVES leaves into X. */
static void site_gather(mtc_block *x, const uint8_t *bytes, uint64_t on0) {
  if (!mtc_has_kernels()) {
    check_skip("gather", "this libmtc was built without its kernels");
    return;
  }
  unsigned long long races = fake.race_count();
  mtc_leaf x_leaf = pinned_leaf(block_address(x), BYTES);
  mtc_plan *earlier = slow_copy(1, &x_leaf, NULL, 1);
  mtc_leaf from0[LEAVES], into_x[LEAVES];
  const uint64_t part = BYTES / LEAVES;
  for (int i = 0; i < LEAVES; i++) {
    from0[i] = make_leaf(on0 + (uint64_t)i * part, part, 1, 0);
    into_x[i] = pinned_leaf(block_address(x) + (uint64_t)i * part, part);
  }
  mtc_plan *later = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &later));
  CHECK_OK(mtc_plan_add_leaves_into(later, from0, into_x, LEAVES));
  CHECK_OK(mtc_plan_submit(later));
  check_ordered("gather", earlier, later, races);
  mtc_plan_stats s = plan_stats(later);
  CHECK_EQ_U64(s.leaves_direct, LEAVES);
  CHECK(s.device_to_host_path == MTC_PATH_GATHER_KERNEL);
  CHECK(memcmp((const void *)(uintptr_t)block_address(x), bytes, BYTES) == 0);
  mtc_plan_release(later);
  mtc_plan_release(earlier);
}

/* completion: cuda:1 reads X in place, then a copy from cuda:0 into X and
 * into pageable memory: one destination of the source is not pinned, so
 * none is written in place; the copy-out writes X once the copy completed,
 * which must be after cuda:1 read it. */
static void site_completion(mtc_block *x, const uint8_t *bytes, uint64_t on0) {
  unsigned long long races = fake.race_count();
  mtc_leaf x_leaf = pinned_leaf(block_address(x), BYTES);
  mtc_plan *earlier = slow_copy(1, &x_leaf, NULL, 1);
  uint8_t *pageable = calloc(1, 64);
  mtc_leaf from0[2] = {make_leaf(on0, BYTES - 64, 1, 0), make_leaf(on0 + BYTES - 64, 64, 1, 0)};
  mtc_leaf into[2] = {pinned_leaf(block_address(x), BYTES - 64),
                      make_leaf(host_address(pageable), 64, 1, MTC_DEVICE_CPU)};
  mtc_plan *later = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &later));
  CHECK_OK(mtc_plan_add_leaves_into(later, from0, into, 2));
  CHECK_OK(mtc_plan_submit(later));
  check_ordered("completion", earlier, later, races);
  CHECK_EQ_U64(plan_stats(later).leaves_direct, 0); /* the copy-out's path */
  CHECK(memcmp((const void *)(uintptr_t)block_address(x), bytes, BYTES - 64) == 0);
  CHECK(memcmp(pageable, bytes + BYTES - 64, 64) == 0);
  free(pageable);
  mtc_plan_release(later);
  mtc_plan_release(earlier);
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 0);
  void *handle = fake_open(getenv("MTC_CUDA_DRIVER"));
  if (handle != NULL) {
    FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
    FAKE_SYM(handle, fake.check_races, "fake_cuda_check_races");
    FAKE_SYM(handle, fake.race_count, "fake_cuda_race_count");
  }
  int32_t devices = 0;
  if (mtc_cuda_device_count(&devices) != MTC_OK) devices = 0;
  if (fake.check_races == NULL || fake.set_copy_delay_us == NULL || fake.race_count == NULL || devices < 2) {
    check_skip(SUITE, "needs the emulated driver's race check and two devices");
    return check_summary(SUITE);
  }
  fake.check_races(1);
  mtc_stats start = checked_stats();
  uint8_t *a = random_bytes(BYTES), *b = random_bytes(BYTES);
  mtc_plan *keep_a = NULL, *keep_b = NULL;
  uint64_t on1 = upload(1, a, BYTES, &keep_a), on0 = upload(0, b, BYTES, &keep_b);
  mtc_block *x = NULL;
  CHECK_OK(mtc_host_block_alloc(0, BYTES, &x));
  if (x != NULL) {
    site_to_device(x, a, on1);
    site_leaf(x, b, on0);
    memcpy((void *)(uintptr_t)block_address(x), a, BYTES);
    site_gather(x, b, on0);
    memcpy((void *)(uintptr_t)block_address(x), a, BYTES);
    site_completion(x, b, on0);
    mtc_block_release(x);
  }
  mtc_plan_release(keep_a);
  mtc_plan_release(keep_b);
  free(a);
  free(b);
  fake.check_races(0);
  mtc_stats end = checked_stats();
  CHECK_EQ_U64(end.plans_live, start.plans_live);
  CHECK_EQ_U64(end.blocks_live, start.blocks_live);
  CHECK_EQ_U64(end.pinned_held_bytes, start.pinned_held_bytes);
  return check_summary(SUITE);
}
