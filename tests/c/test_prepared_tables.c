/* test_prepared_tables.c — a prepared copy into device memory keeps its
 * scatter tables on the target: one device block made with the prepared
 * copy and held by each plan that reads it; copies of new sources into the
 * template's destinations land right through it; a copy laid out afresh
 * (the pinned pool's limit changed the cut, or new destinations given)
 * stages its own tables instead; everything is freed once the last holder
 * goes. Against the emulated driver (its path in argv[1]) or a real GPU. */
#include "check.h"
#include "helpers.h"
#include "readback.h"

#define SUITE "test_prepared_tables"
enum { LEAVES = 40, BYTES = 16 << 10 };

typedef struct sources {
  uint8_t *data;
  mtc_leaf leaves[LEAVES];
} sources;

/* LEAVES host leaves of BYTES, random, in one fresh buffer. */
static void make_sources(sources *s) {
  s->data = random_bytes(LEAVES * BYTES);
  for (int i = 0; i < LEAVES; i++) {
    s->leaves[i] = make_leaf(host_address(s->data + (size_t)i * BYTES), BYTES, 4, MTC_DEVICE_CPU);
  }
}

/* Waits for the plan and checks that every destination holds its leaf's
 * bytes of `s`; then releases the plan. */
static void check_landed(const char *what, mtc_plan *plan, const sources *s, const mtc_leaf *dst) {
  CHECK(plan != NULL);
  if (plan == NULL) return;
  CHECK_OK(mtc_plan_wait(plan));
  uint8_t *got = malloc(BYTES);
  int wrong = -1;
  for (int i = 0; i < LEAVES && wrong < 0; i++) {
    download(0, dst[i].address, BYTES, got);
    if (memcmp(got, s->data + (size_t)i * BYTES, BYTES) != 0) wrong = i;
  }
  if (wrong >= 0) printf("%s: leaf %d differs\n", what, wrong);
  CHECK(wrong < 0);
  free(got);
  mtc_plan_release(plan);
}

static void test_tables(void) {
  /* Destinations in reverse order, so that no table of another layout
   * could place them right by chance. */
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(0, 2 * LEAVES * BYTES, 0, &block));
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  CHECK_OK(mtc_block_get_info(block, &info));
  mtc_leaf dst[LEAVES], other[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    dst[i] = make_leaf(info.address + (uint64_t)(LEAVES - 1 - i) * BYTES, BYTES, 4, 0);
    other[i] = make_leaf(info.address + (uint64_t)(LEAVES + i) * BYTES, BYTES, 4, 0);
  }
  sources first, next, third;
  make_sources(&first);
  mtc_stats before = checked_stats();
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, first.leaves, dst, LEAVES));
  mtc_prepared *p = NULL;
  CHECK_OK(mtc_prepared_create(plan, &p));
  mtc_plan_release(plan);
  mtc_stats made = checked_stats();
  /* One block of one 24-byte segment per leaf. */
  CHECK_EQ_U64(made.blocks_live, before.blocks_live + 1);
  CHECK_EQ_U64(made.device_bytes_live, before.device_bytes_live + LEAVES * 24);

  CHECK_OK(mtc_prepared_submit(p, first.leaves, NULL, LEAVES, &plan));
  check_landed("the template's batch", plan, &first, dst);
  make_sources(&next);
  CHECK_OK(mtc_prepared_submit(p, next.leaves, NULL, LEAVES, &plan));
  check_landed("new sources", plan, &next, dst);
  CHECK_OK(mtc_prepared_submit(p, first.leaves, other, LEAVES, &plan));
  check_landed("new destinations", plan, &first, other);

  /* A smaller pinned limit cuts the chunks anew: the kept tables no longer
   * fit that layout and must not be read. */
  uint64_t limit = checked_stats().pinned_limit_bytes;
  CHECK_OK(mtc_set_pinned_limit(1u << 20));
  CHECK_OK(mtc_prepared_submit(p, next.leaves, NULL, LEAVES, &plan));
  check_landed("under a smaller pinned limit", plan, &next, dst);
  CHECK_OK(mtc_set_pinned_limit(limit));

  /* The prepared copy released under a plan that reads its tables (a
   * launch reading freed memory fails on the emulated driver). */
  make_sources(&third);
  CHECK_OK(mtc_prepared_submit(p, third.leaves, NULL, LEAVES, &plan));
  mtc_prepared_release(p);
  check_landed("after the release", plan, &third, dst);
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  CHECK_EQ_U64(after.device_bytes_live, before.device_bytes_live);
  mtc_block_release(block);
  free(first.data);
  free(next.data);
  free(third.data);
}

/* A copy to the host, or of a single leaf, keeps no tables. */
static void test_no_tables(void) {
  sources s;
  make_sources(&s);
  uint8_t *out = malloc(LEAVES * BYTES);
  mtc_leaf dst[LEAVES];
  for (int i = 0; i < LEAVES; i++) dst[i] = make_leaf(host_address(out + (size_t)i * BYTES), BYTES, 4, MTC_DEVICE_CPU);
  uint64_t blocks = checked_stats().blocks_live;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, s.leaves, dst, LEAVES));
  mtc_prepared *p = NULL;
  CHECK_OK(mtc_prepared_create(plan, &p));
  mtc_plan_release(plan);
  CHECK_EQ_U64(checked_stats().blocks_live, blocks);
  mtc_prepared_release(p);
  free(out);
  free(s.data);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  (void)driver; /* NULL on a CUDA host: the real driver */
  int32_t devices = 0;
  if (mtc_cuda_device_count(&devices) != MTC_OK || devices < 1) {
    check_skip(SUITE, "needs a CUDA device");
    return check_summary(SUITE);
  }
  test_tables();
  test_no_tables();
  return check_summary(SUITE);
}
