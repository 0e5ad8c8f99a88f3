/* test_prepared_rules.c — what prepared copies (mtc/prepared.h) refuse and
 * how they live: plans that cannot be templates, a batch that differs from
 * its template in anything but its addresses (named by leaf, nothing made),
 * overlaps found when addresses change, a plan of mtc_prepared_plan taking
 * no leaves, the pinned pool's limit changing the cut; many plans of one
 * template in flight at once, the template released under them, and
 * threads submitting from one template together (for ThreadSanitizer).
 * Against the emulated driver (its path in argv[1]) or a real GPU. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"

#define SUITE "test_prepared_rules"
enum { N = 8, LEAF_BYTES = 64 };

static void (*set_copy_delay_us)(unsigned long long us);

/* N leaves of LEAF_BYTES in one fresh buffer, filled with `seed`. */
static uint8_t *host_leaves(mtc_leaf *leaves, int seed) {
  uint8_t *data = malloc(N * LEAF_BYTES);
  for (int i = 0; i < N; i++) {
    memset(data + i * LEAF_BYTES, seed + i, LEAF_BYTES);
    leaves[i] = make_leaf(host_address(data + i * LEAF_BYTES), LEAF_BYTES, 4, MTC_DEVICE_CPU);
  }
  return data;
}

static mtc_plan *plan_of(int32_t target, const mtc_leaf *leaves, const mtc_leaf *dst) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, NULL, &plan));
  if (dst != NULL) CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, dst, N));
  else CHECK_OK(mtc_plan_add_leaves(plan, leaves, N));
  return plan;
}

static mtc_prepared *prepared_of(int32_t target, const mtc_leaf *leaves, const mtc_leaf *dst) {
  mtc_plan *plan = plan_of(target, leaves, dst);
  mtc_prepared *p = NULL;
  CHECK_OK(mtc_prepared_create(plan, &p));
  mtc_plan_release(plan);
  return p;
}

/* The plan's leaves landed on cuda:0 with the bytes of `seed` (read back by
 * a plan to the host; no CHECK, so that threads may call it). */
static int landed(mtc_plan *plan, int seed) {
  mtc_leaf_result r[N], back[N];
  mtc_leaf on[N];
  if (mtc_plan_wait(plan) != MTC_OK || mtc_plan_results(plan, 0, N, r) != MTC_OK) return 0;
  for (int i = 0; i < N; i++) on[i] = make_leaf(r[i].address, LEAF_BYTES, 4, 0);
  mtc_plan *down = NULL;
  int ok = mtc_plan_create(MTC_DEVICE_CPU, NULL, &down) == MTC_OK &&
           mtc_plan_add_leaves(down, on, N) == MTC_OK && mtc_plan_submit(down) == MTC_OK &&
           mtc_plan_wait(down) == MTC_OK && mtc_plan_results(down, 0, N, back) == MTC_OK;
  for (int i = 0; ok && i < N; i++) {
    uint8_t want[LEAF_BYTES];
    memset(want, seed + i, LEAF_BYTES);
    ok = memcmp((const void *)(uintptr_t)back[i].address, want, LEAF_BYTES) == 0;
  }
  mtc_plan_release(down);
  return ok;
}

static uint64_t plans_live(void) { return checked_stats().plans_live; }

static void test_templates_refused(void) {
  mtc_leaf leaves[N];
  uint8_t *data = host_leaves(leaves, 1);
  mtc_prepared *p = (mtc_prepared *)&p;
  mtc_plan *plan = plan_of(0, leaves, NULL);
  CHECK_STATUS(mtc_prepared_create(NULL, &p), MTC_ERR_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK_STATUS(mtc_prepared_create(plan, NULL), MTC_ERR_INVALID_ARGUMENT);
  uint64_t stream = 0;
  CHECK_OK(mtc_stream_create(0, &stream));
  CHECK_OK(mtc_plan_set_stream(plan, 0, stream));
  CHECK_STATUS(mtc_prepared_create(plan, &p), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "mtc_plan_set_stream");
  /* Only read: the plan goes on as it was. */
  CHECK_OK(mtc_plan_submit(plan));
  CHECK(landed(plan, 1));
  CHECK_STATUS(mtc_prepared_create(plan, &p), MTC_ERR_INVALID_STATE);
  CHECK(p == NULL);
  mtc_plan_release(plan);
  mtc_stream_destroy(0, stream);

  /* A leaf on a device this machine lacks, as submit would say. */
  leaves[5].device = 7;
  plan = plan_of(0, leaves, NULL);
  CHECK_STATUS(mtc_prepared_create(plan, &p), MTC_ERR_NO_DEVICE);
  CHECK_CONTAINS(mtc_last_error(), "leaf 5:");
  mtc_plan_release(plan);
  leaves[5].device = MTC_DEVICE_CPU;

  /* Destinations that overlap, and destination blocks. */
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(0, N * LEAF_BYTES, 0, &block));
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  CHECK_OK(mtc_block_get_info(block, &info));
  mtc_leaf dst[N];
  for (int i = 0; i < N; i++) dst[i] = make_leaf(info.address + (uint64_t)i * LEAF_BYTES, LEAF_BYTES, 4, 0);
  dst[6].address = dst[2].address + 4;
  plan = plan_of(0, leaves, dst);
  CHECK_STATUS(mtc_prepared_create(plan, &p), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "leaf 6: its destination overlaps the destination of leaf 2");
  mtc_plan_release(plan);
  dst[6].address = info.address + 6 * LEAF_BYTES;
  plan = plan_of(0, leaves, dst);
  mtc_block *blocks[N] = {block};
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, 1));
  CHECK_STATUS(mtc_prepared_create(plan, &p), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "destination blocks");
  mtc_plan_release(plan);
  mtc_block_release(block);
  free(data);
}

/* Each field but the address is the template's; nothing is made otherwise. */
static void test_batches_refused(void) {
  mtc_leaf leaves[N], given[N];
  uint8_t *data = host_leaves(leaves, 1);
  mtc_prepared *p = prepared_of(0, leaves, NULL);
  uint64_t live = plans_live();
  mtc_plan *plan = (mtc_plan *)&plan;
  CHECK_STATUS(mtc_prepared_submit(p, leaves, NULL, N - 1, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "count is 7 but the prepared copy has 8 leaves");
  CHECK(plan == NULL);
  CHECK_STATUS(mtc_prepared_submit(NULL, leaves, NULL, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_prepared_submit(p, NULL, NULL, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_prepared_submit(p, leaves, NULL, N, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_prepared_submit(p, leaves, leaves, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "without them");
  static const char *const says[] = {"leaf 3: bytes is 68 but the prepared copy's is 64",
                                     "leaf 3: element_size is 8",
                                     "leaf 3: device is 0 but the prepared copy's is -1",
                                     "leaf 3: row_count is 2",
                                     "leaf 3: row_pitch is 128",
                                     "leaf 3: flags is 1 but the prepared copy's is 0",
                                     "leaf 3: address is 0 but bytes is 64",
                                     "leaf 3: address + size overflows"};
  for (int k = 0; k < 8; k++) {
    memcpy(given, leaves, sizeof given);
    mtc_leaf *l = &given[3];
    switch (k) {
      case 0: l->bytes += 4; break;
      case 1: l->element_size = 8; break;
      case 2: l->device = 0; break;
      case 3: l->row_count = 2, l->row_pitch = 64; break;
      case 4: l->row_pitch = 128; break;
      case 5: l->flags = MTC_LEAF_NO_PACK; break;
      case 6: l->address = 0; break;
      case 7: l->address = UINT64_MAX - 8; break;
    }
    plan = (mtc_plan *)&plan;
    CHECK_STATUS(mtc_prepared_submit(p, given, NULL, N, &plan), MTC_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(mtc_last_error(), says[k]);
    CHECK(plan == NULL);
    plan = (mtc_plan *)&plan;
    CHECK_STATUS(mtc_prepared_plan(p, given, NULL, N, &plan), MTC_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL);
  }
  CHECK_EQ_U64(plans_live(), live);
  mtc_prepared_release(p);
  /* Rows reach past the leaf's bytes: their reach is what must fit. */
  leaves[3].row_count = 2, leaves[3].row_pitch = 128;
  p = prepared_of(0, leaves, NULL);
  memcpy(given, leaves, sizeof given);
  given[3].address = UINT64_MAX - 100;
  CHECK_STATUS(mtc_prepared_submit(p, given, NULL, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), says[7]);
  mtc_prepared_release(p);
  free(data);
}

/* Into cuda:0 from cuda:0: destinations checked when addresses change. */
static void test_destinations(void) {
  mtc_leaf leaves[N], dst[N], given[N];
  uint8_t *data = host_leaves(leaves, 3);
  mtc_plan *up = plan_of(0, leaves, NULL);
  mtc_leaf_result on[N];
  CHECK_OK(mtc_plan_submit(up));
  CHECK_OK(mtc_plan_wait(up));
  CHECK_OK(mtc_plan_results(up, 0, N, on));
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(0, N * LEAF_BYTES, 0, &block));
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  CHECK_OK(mtc_block_get_info(block, &info));
  for (int i = 0; i < N; i++) {
    leaves[i] = make_leaf(on[i].address, LEAF_BYTES, 4, 0);
    dst[i] = make_leaf(info.address + (uint64_t)i * LEAF_BYTES, LEAF_BYTES, 4, 0);
  }
  mtc_prepared *p = prepared_of(0, leaves, dst);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_prepared_submit(p, leaves, NULL, N, &plan));
  CHECK(plan != NULL && landed(plan, 3));
  mtc_plan_release(plan);
  memcpy(given, dst, sizeof given);
  given[4].address = given[1].address;
  plan = (mtc_plan *)&plan;
  CHECK_STATUS(mtc_prepared_submit(p, leaves, given, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "leaf 4: its destination overlaps the destination of leaf 1");
  CHECK(plan == NULL);
  given[4] = dst[4];
  given[2].bytes = 8;
  CHECK_STATUS(mtc_prepared_submit(p, leaves, given, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "leaf 2: its destination's bytes is 8");
  given[2] = dst[2];
  given[2].address = 0;
  CHECK_STATUS(mtc_prepared_submit(p, leaves, given, N, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "leaf 2: its destination's address is 0");
  /* New sources that are the destinations; through mtc_prepared_plan the
   * plan is made and its submit refuses them, naming the leaf. */
  memcpy(given, leaves, sizeof given);
  given[5].address = dst[5].address;
  CHECK_OK(mtc_prepared_plan(p, given, NULL, N, &plan));
  CHECK_STATUS(mtc_plan_add_leaves(plan, leaves, 1), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "made from a prepared copy");
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, NULL), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_plan_submit(plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_plan_last_error(plan), "leaf 5: its destination overlaps the leaf itself");
  CHECK(mtc_plan_error_leaf(plan) == 5);
  mtc_plan_release(plan);
  mtc_prepared_release(p);
  mtc_block_release(block);
  mtc_plan_release(up);
  free(data);
}

/* A template made under one pinned limit and submitted under a smaller one
 * is cut as a plain plan is then. */
static void test_pinned_limit(void) {
  enum { LEAVES = 40, BYTES = 16 << 10 };
  uint8_t *data = random_bytes(LEAVES * BYTES);
  mtc_leaf leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) leaves[i] = make_leaf(host_address(data + i * BYTES), BYTES, 4, MTC_DEVICE_CPU);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, LEAVES));
  mtc_prepared *p = NULL;
  CHECK_OK(mtc_prepared_create(plan, &p));
  mtc_plan_release(plan);
  uint64_t limit = checked_stats().pinned_limit_bytes;
  CHECK_OK(mtc_set_pinned_limit(1u << 20));
  mtc_plan_stats want = {.struct_size = sizeof want}, got = {.struct_size = sizeof got};
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_get_stats(plan, &want));
  mtc_plan_release(plan);
  CHECK_OK(mtc_prepared_submit(p, leaves, NULL, LEAVES, &plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_get_stats(plan, &got));
  CHECK(want.chunks > 1);
  CHECK_EQ_U64(got.chunks, want.chunks);
  mtc_plan_release(plan);
  CHECK_OK(mtc_set_pinned_limit(limit));
  mtc_prepared_release(p);
  free(data);
}

/* Many plans of one template in flight, the template released under them. */
static void test_in_flight(void) {
  enum { PLANS = 8 };
  mtc_leaf leaves[N];
  uint8_t *data[PLANS];
  mtc_plan *plans[PLANS];
  data[0] = host_leaves(leaves, 10);
  mtc_prepared *p = prepared_of(0, leaves, NULL);
  if (set_copy_delay_us) set_copy_delay_us(20000);
  for (int k = 0; k < PLANS; k++) {
    if (k > 0) data[k] = host_leaves(leaves, 10 + k);
    plans[k] = NULL;
    CHECK_OK(mtc_prepared_submit(p, leaves, NULL, N, &plans[k]));
  }
  if (set_copy_delay_us) CHECK_STATUS(mtc_plan_poll(plans[0]), MTC_IN_PROGRESS);
  mtc_prepared_release(p);
  for (int k = PLANS - 1; k >= 0; k--) {
    CHECK(plans[k] != NULL && landed(plans[k], 10 + k));
    mtc_plan_release(plans[k]);
    free(data[k]);
  }
  if (set_copy_delay_us) set_copy_delay_us(0);
}

static mtc_prepared *shared;
static atomic_int thread_failures;

static void *submitter(void *arg) {
  int seed = (int)(intptr_t)arg;
  for (int round = 0; round < 25; round++) {
    mtc_leaf leaves[N];
    uint8_t *data = host_leaves(leaves, seed + round);
    mtc_plan *plan = NULL;
    if (mtc_prepared_submit(shared, leaves, NULL, N, &plan) != MTC_OK || !landed(plan, seed + round)) {
      atomic_fetch_add(&thread_failures, 1);
    }
    mtc_plan_release(plan);
    free(data);
  }
  return NULL;
}

static void test_threads(void) {
  mtc_leaf leaves[N];
  uint8_t *data = host_leaves(leaves, 0);
  shared = prepared_of(0, leaves, NULL);
  pthread_t threads[4];
  for (int t = 0; t < 4; t++) pthread_create(&threads[t], NULL, submitter, (void *)(intptr_t)(40 * t));
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  CHECK(atomic_load(&thread_failures) == 0);
  mtc_prepared_release(shared);
  mtc_prepared_release(NULL);
  CHECK_EQ_U64(mtc_prepared_leaf_count(NULL), 0);
  free(data);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver != NULL) {
    void *fake = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
    if (fake != NULL) FAKE_SYM(fake, set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  }
  int32_t devices = 0;
  if (mtc_cuda_device_count(&devices) != MTC_OK || devices < 1) {
    check_skip(SUITE, "needs a CUDA device");
    return check_summary(SUITE);
  }
  uint64_t live = plans_live();
  test_templates_refused();
  test_batches_refused();
  test_destinations();
  test_pinned_limit();
  test_in_flight();
  test_threads();
  CHECK_EQ_U64(plans_live(), live);
  return check_summary(SUITE);
}
