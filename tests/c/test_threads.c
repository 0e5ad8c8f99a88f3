/* test_threads.c — many threads calling the library at once against the
 * emulated driver (its path in argv[1]), for ThreadSanitizer (`zig build
 * test -Dtsan` runs every C test under it): each thread creates, fills,
 * submits (on the background thread or its own), polls or waits, checks and
 * releases plans to cuda:0 and back, half of them reading one pinned block
 * that all share in place, while other threads allocate and release pinned
 * blocks, ask whether the shared one is busy and read the counters. Every
 * byte copied is checked; the counters end where they began. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "helpers.h"

#define SUITE "test_threads"
enum { THREADS = 6, ROUNDS = 40, LEAVES = 24, LEAF_BYTES = 200 };

static mtc_block *shared_block;
static uint64_t shared_address;
static atomic_int bad_bytes, failures;

static void fail_if(int condition) {
  if (condition) atomic_fetch_add(&failures, 1);
}

/* One round trip of LEAVES leaves: to cuda:0, then back, compared. */
static void round_trip(unsigned seed, int pinned, int background) {
  uint8_t *pageable = malloc(LEAVES * LEAF_BYTES);
  mtc_leaf leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    uint8_t *p = pinned && i % 2 == 0
                     ? (uint8_t *)(uintptr_t)(shared_address + (uint64_t)i * LEAF_BYTES)
                     : pageable + i * LEAF_BYTES;
    /* The shared block holds fixed bytes: every thread reads it, none writes. */
    if (p == pageable + i * LEAF_BYTES) memset(p, (int)((seed + (unsigned)i) & 0xff), LEAF_BYTES);
    leaves[i] = make_leaf(host_address(p), LEAF_BYTES, 4, MTC_DEVICE_CPU);
    if (pinned) leaves[i].flags = MTC_LEAF_PINNED;
  }
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = (uint32_t)background;
  mtc_plan *up = NULL, *down = NULL;
  mtc_leaf_result on_device[LEAVES], back[LEAVES];
  fail_if(mtc_plan_create(0, &o, &up) != MTC_OK);
  fail_if(mtc_plan_add_leaves(up, leaves, LEAVES) != MTC_OK);
  fail_if(mtc_plan_submit(up) != MTC_OK);
  while (mtc_plan_poll(up) == MTC_IN_PROGRESS) {
  }
  fail_if(mtc_plan_results(up, 0, LEAVES, on_device) != MTC_OK);
  mtc_leaf device_leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    device_leaves[i] = make_leaf(on_device[i].address, LEAF_BYTES, 4, 0);
  }
  fail_if(mtc_plan_create(MTC_DEVICE_CPU, &o, &down) != MTC_OK);
  fail_if(mtc_plan_add_leaves(down, device_leaves, LEAVES) != MTC_OK);
  fail_if(mtc_plan_submit(down) != MTC_OK);
  fail_if(mtc_plan_wait(down) != MTC_OK);
  fail_if(mtc_plan_results(down, 0, LEAVES, back) != MTC_OK);
  for (int i = 0; i < LEAVES; i++) {
    if (memcmp((const void *)(uintptr_t)back[i].address,
               (const void *)(uintptr_t)leaves[i].address, LEAF_BYTES) != 0) {
      atomic_fetch_add(&bad_bytes, 1);
    }
  }
  mtc_plan_release(down);
  mtc_plan_release(up);
  free(pageable);
}

static void *copier(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) round_trip(id * 1000u + (unsigned)r, r % 2, (r / 2) % 2);
  return NULL;
}

/* Pinned blocks allocated and released, the shared one asked about, the
 * counters read, while the copiers run. */
static void *churner(void *arg) {
  (void)arg;
  for (int r = 0; r < ROUNDS * 4; r++) {
    mtc_block *block = NULL;
    fail_if(mtc_host_block_alloc(0, 4096u * (uint64_t)(1 + r % 5), &block) != MTC_OK);
    (void)mtc_block_busy(shared_block);
    (void)mtc_block_busy(block);
    mtc_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    fail_if(mtc_get_stats(&s) != MTC_OK);
    mtc_block_release(block);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  mtc_stats before = checked_stats();
  CHECK_OK(mtc_host_block_alloc(0, (uint64_t)LEAVES * LEAF_BYTES, &shared_block));
  if (shared_block == NULL) return check_summary(SUITE);
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(shared_block, &info));
  shared_address = info.address;
  memset((void *)(uintptr_t)shared_address, 0x5C, (size_t)LEAVES * LEAF_BYTES);

  pthread_t threads[THREADS + 2];
  for (int t = 0; t < THREADS; t++) {
    CHECK(pthread_create(&threads[t], NULL, copier, (void *)(uintptr_t)t) == 0);
  }
  for (int t = THREADS; t < THREADS + 2; t++) {
    CHECK(pthread_create(&threads[t], NULL, churner, NULL) == 0);
  }
  for (int t = 0; t < THREADS + 2; t++) pthread_join(threads[t], NULL);
  CHECK_OK(mtc_block_wait_idle(shared_block));
  CHECK(mtc_block_busy(shared_block) == 0);
  mtc_block_release(shared_block);

  CHECK_EQ_U64((uint64_t)atomic_load(&failures), 0);
  CHECK_EQ_U64((uint64_t)atomic_load(&bad_bytes), 0);
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  CHECK_EQ_U64(after.pinned_held_bytes, before.pinned_held_bytes);
  printf("%s: %d threads x %d round trips of %d leaves, %d threads allocating pinned blocks\n", SUITE,
         THREADS, ROUNDS, LEAVES, 2);
  return check_summary(SUITE);
}
