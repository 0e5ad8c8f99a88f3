/* test_owners.c — owners, refs and parcels (mtc/owner.h) against the
 * emulated driver (its path in argv[1]): each kind of reference adopted,
 * retained and released with the counters back where they began; unknown
 * refs ignored; moves all or nothing; parcels taken once or dropped by
 * sender; ids of another process unknown; parcels described, taken whole
 * only as described, and dropped by parcel calls that refuse any other
 * owner; a thread's owner released when the thread exits with blocks,
 * pinned memory and a copy in flight; a released owner's plan waited for,
 * also while another thread waits on it. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "cuda/event.h"
#include "run/plan_state.h"
#include "fake_symbols.h"
#include "helpers.h"

#define SUITE "test_owners"
enum { LEAVES = 4, LEAF_BYTES = 256 };

static struct {
  void (*set_copy_delay_us)(unsigned long long);
} fake;

/* Leaf memory that outlives every thread of the test. */
static uint8_t source[LEAVES * LEAF_BYTES];

/* `id` as another process would have numbered it: another key. Its counter
 * is 2^40 away, so it names nothing here. */
static uint64_t foreign(uint64_t id) { return id ^ ((uint64_t)1 << 40); }

static mtc_owner new_owner(uint32_t flags, mtc_owner sender) {
  mtc_owner owner = 0;
  CHECK_OK(mtc_owner_create(flags, sender, &owner));
  CHECK(owner != 0);
  return owner;
}

/* A plan of LEAVES host leaves to cuda:0, submitted. */
static mtc_plan *submitted_plan(uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, &o, &plan));
  mtc_leaf leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(host_address(source + i * LEAF_BYTES), LEAF_BYTES, 4, MTC_DEVICE_CPU);
  }
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  return plan;
}

static mtc_block *pinned_block(void) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_host_block_alloc(0, 4096, &block));
  return block;
}

static void check_counters(const mtc_stats *before) {
  mtc_stats now = checked_stats();
  CHECK_EQ_U64(now.plans_live, before->plans_live);
  CHECK_EQ_U64(now.blocks_live, before->blocks_live);
  CHECK_EQ_U64(now.pinned_held_bytes, before->pinned_held_bytes);
}

static void test_kinds(void) {
  mtc_stats before = checked_stats();
  uint64_t events_before = mtc_event_live_count();
  mtc_owner owner = new_owner(0, 0);
  CHECK(mtc_owner_alive(owner) == 1);
  CHECK(mtc_owner_ref_count(owner) == 0);

  /* A block adopted, then retained a second time: the first release of a
   * ref keeps it alive. */
  mtc_block *pinned = pinned_block();
  mtc_ref adopted = mtc_ref_adopt(owner, MTC_REF_BLOCK, pinned);
  mtc_ref retained = mtc_ref_retain_block(owner, pinned);
  CHECK(adopted != 0 && retained != 0 && adopted != retained);
  CHECK(mtc_owner_ref_count(owner) == 2);
  mtc_ref_release(adopted);
  CHECK_EQ_U64(checked_stats().blocks_live, before.blocks_live + 1);
  mtc_ref_release(adopted); /* unknown now: ignored */
  CHECK_EQ_U64(checked_stats().blocks_live, before.blocks_live + 1);
  mtc_ref_release_callback(NULL, (void *)(uintptr_t)retained);
  CHECK(mtc_owner_ref_count(owner) == 0);
  check_counters(&before);

  /* A device block, a plan and its completion event. */
  mtc_block *device = NULL;
  CHECK_OK(mtc_device_block_alloc(0, 4096, 0, &device));
  mtc_plan *plan = submitted_plan(1);
  CHECK_OK(mtc_plan_wait(plan));
  mtc_event *event = NULL;
  CHECK_OK(mtc_plan_completion_event(plan, &event));
  CHECK(event != NULL);
  mtc_ref refs[3] = {mtc_ref_adopt(owner, MTC_REF_BLOCK, device),
                     mtc_ref_adopt(owner, MTC_REF_PLAN, plan),
                     mtc_ref_adopt(owner, MTC_REF_EVENT, event)};
  CHECK(refs[0] != 0 && refs[1] != 0 && refs[2] != 0);
  CHECK(mtc_owner_ref_count(owner) == 3);
  mtc_ref_release(refs[2]);
  mtc_ref_release(refs[1]);
  CHECK_EQ_U64(checked_stats().plans_live, before.plans_live);
  CHECK_OK(mtc_owner_release(owner));
  check_counters(&before);
  CHECK_EQ_U64(mtc_event_live_count(), events_before);
  mtc_ref_release(refs[0]); /* its owner ended: ignored */

  /* Refused: the reference stays the caller's, untouched. */
  owner = new_owner(0, 0);
  mtc_block *mine = pinned_block();
  CHECK(mtc_ref_adopt(owner, 7, mine) == 0);
  CHECK_CONTAINS(mtc_last_error(), "kind 7");
  CHECK(mtc_ref_adopt(owner, MTC_REF_BLOCK, NULL) == 0);
  CHECK(mtc_ref_retain_block(owner, NULL) == 0);
  CHECK(mtc_ref_adopt(foreign(owner), MTC_REF_BLOCK, mine) == 0);
  CHECK_CONTAINS(mtc_last_error(), "is unknown");
  CHECK(mtc_ref_retain_block(foreign(owner), mine) == 0);
  CHECK(mtc_owner_ref_count(owner) == 0);
  mtc_block_release(mine); /* the one reference there ever was */
  check_counters(&before);

  /* Numbers never seen, and 0: ignored. */
  mtc_ref_release(0);
  mtc_ref_release((mtc_ref)1 << 50);
  mtc_ref_release((mtc_ref)1 << 50);
  CHECK_OK(mtc_owner_release(owner));
}

static void test_ended_owners(void) {
  mtc_owner owner = new_owner(0, 0);
  CHECK_OK(mtc_owner_release(owner));
  CHECK(mtc_owner_alive(owner) == 0);
  CHECK(mtc_owner_ref_count(owner) == -1);
  CHECK_STATUS(mtc_owner_release(owner), MTC_ERR_INVALID_ARGUMENT);
  char expected[96];
  snprintf(expected, sizeof expected, "owner %llu has ended", (unsigned long long)owner);
  CHECK_CONTAINS(mtc_last_error(), expected);
  CHECK_STATUS(mtc_owner_release(foreign(owner)), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "is unknown");
  CHECK_STATUS(mtc_owner_release(0), MTC_ERR_INVALID_ARGUMENT);
  CHECK(mtc_owner_alive(0) == 0);
  CHECK(mtc_ref_adopt(owner, MTC_REF_BLOCK, source) == 0);
  CHECK_CONTAINS(mtc_last_error(), expected);

  mtc_owner bad = 99;
  CHECK_STATUS(mtc_owner_create(MTC_OWNER_THREAD | MTC_OWNER_PARCEL, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK(bad == 0);
  CHECK_STATUS(mtc_owner_create(1u << 5, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_owner_create(0, 0, NULL), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_owner_create(MTC_OWNER_PARCEL, owner, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "sender");
}

static void test_move_and_take(void) {
  mtc_stats before = checked_stats();
  uint64_t parcels_before = mtc_parcels_live();
  mtc_owner a = new_owner(0, 0), b = new_owner(0, 0);
  mtc_block *block = pinned_block();
  mtc_ref held[3];
  for (int i = 0; i < 3; i++) held[i] = mtc_ref_retain_block(a, block);
  mtc_ref of_b = mtc_ref_retain_block(b, block);
  mtc_block_release(block); /* the owners hold it now */
  mtc_owner parcel = new_owner(MTC_OWNER_PARCEL, a);
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before + 1);

  /* All or nothing: each refusal names the index and moves none. */
  mtc_ref wrong_owner[2] = {held[0], of_b};
  CHECK_STATUS(mtc_ref_move(a, parcel, wrong_owner, 2), MTC_ERR_INVALID_ARGUMENT);
  char expected[96];
  snprintf(expected, sizeof expected, "(index 1) is not held by owner %llu", (unsigned long long)a);
  CHECK_CONTAINS(mtc_last_error(), expected);
  mtc_ref twice[3] = {held[0], held[1], held[0]};
  CHECK_STATUS(mtc_ref_move(a, parcel, twice, 3), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "(index 2) is given twice");
  mtc_ref unknown[2] = {held[1], (mtc_ref)1 << 50};
  CHECK_STATUS(mtc_ref_move(a, parcel, unknown, 2), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "(index 1)");
  CHECK_STATUS(mtc_ref_move(a, foreign(parcel), held, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_ref_move(a, parcel, NULL, 1), MTC_ERR_INVALID_ARGUMENT);
  CHECK(wrong_owner[0] == held[0] && twice[1] == held[1] && unknown[0] == held[1]);
  CHECK(mtc_owner_ref_count(a) == 3 && mtc_owner_ref_count(parcel) == 0);

  /* Two moved: new numbers; the old ones release nothing. */
  mtc_ref moving[2] = {held[0], held[1]};
  CHECK_OK(mtc_ref_move(a, parcel, moving, 2));
  CHECK(moving[0] != held[0] && moving[1] != held[1] && moving[0] != moving[1]);
  CHECK(mtc_owner_ref_count(a) == 1 && mtc_owner_ref_count(parcel) == 2);
  mtc_ref_release(held[0]);
  mtc_ref_release(held[1]);
  CHECK(mtc_owner_ref_count(parcel) == 2);
  CHECK_OK(mtc_ref_move(a, parcel, NULL, 0));

  /* Taken whole: the refs keep their numbers; once only. */
  CHECK_STATUS(mtc_owner_take(a, b), MTC_ERR_INVALID_STATE); /* no parcel */
  CHECK_STATUS(mtc_owner_take(parcel, parcel), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_owner_take(parcel, foreign(b)), MTC_ERR_INVALID_ARGUMENT);
  CHECK(mtc_owner_ref_count(parcel) == 2);
  CHECK_OK(mtc_owner_take(parcel, b));
  CHECK(mtc_owner_alive(parcel) == 0);
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before);
  CHECK(mtc_owner_ref_count(b) == 3);
  CHECK_STATUS(mtc_owner_take(parcel, b), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "taken already or dropped");
  mtc_ref_release(moving[0]);
  CHECK(mtc_owner_ref_count(b) == 2);

  CHECK_OK(mtc_owner_release(a));
  CHECK_EQ_U64(checked_stats().blocks_live, before.blocks_live + 1);
  CHECK_OK(mtc_owner_release(b));
  check_counters(&before);
}

static void test_drop_parcels(void) {
  mtc_stats before = checked_stats();
  uint64_t parcels_before = mtc_parcels_live();
  mtc_owner a = new_owner(0, 0), b = new_owner(0, 0);
  mtc_owner of_a[3], of_b = new_owner(MTC_OWNER_PARCEL, b);
  mtc_owner of_none = new_owner(MTC_OWNER_PARCEL, 0);
  for (int i = 0; i < 3; i++) {
    of_a[i] = new_owner(MTC_OWNER_PARCEL, a);
    CHECK(mtc_ref_adopt(of_a[i], MTC_REF_BLOCK, pinned_block()) != 0);
  }
  CHECK(mtc_ref_adopt(of_b, MTC_REF_BLOCK, pinned_block()) != 0);
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before + 5);
  /* A parcel outlives its sender, until dropped. */
  CHECK_OK(mtc_owner_release(a));
  CHECK(mtc_owner_alive(of_a[1]) == 1);
  CHECK_OK(mtc_owner_take(of_a[1], b));
  CHECK_EQ_U64(mtc_owner_drop_parcels(a), 2);
  CHECK(mtc_owner_alive(of_a[0]) == 0 && mtc_owner_alive(of_a[2]) == 0);
  CHECK(mtc_owner_alive(of_b) == 1);
  CHECK_EQ_U64(mtc_owner_drop_parcels(a), 0);
  CHECK_EQ_U64(mtc_owner_drop_parcels(0), 0);
  CHECK_STATUS(mtc_owner_take(of_a[0], b), MTC_ERR_INVALID_STATE);
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before + 2);
  CHECK_EQ_U64(checked_stats().blocks_live, before.blocks_live + 2);
  CHECK_EQ_U64(mtc_owner_drop_parcels(b), 1);
  CHECK_OK(mtc_owner_release(of_none));
  CHECK_OK(mtc_owner_release(b));
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before);
  check_counters(&before);
}

/* A thread that holds a device block, a copy's results, a pinned block and
 * a copy in flight in its own owner, and ends without releasing them;
 * `early` releases its second owner first, which its exit must skip. */
static void *holding_thread(void *arg) {
  int early = arg != NULL;
  mtc_owner owner = new_owner(MTC_OWNER_THREAD, 0);
  mtc_owner second = new_owner(MTC_OWNER_THREAD, 0);
  mtc_block *device = NULL;
  CHECK_OK(mtc_device_block_alloc(0, 1 << 16, MTC_ALLOC_ZERO, &device));
  CHECK(mtc_ref_adopt(owner, MTC_REF_BLOCK, device) != 0);
  CHECK(mtc_ref_adopt(second, MTC_REF_BLOCK, pinned_block()) != 0);
  mtc_plan *done = submitted_plan(0);
  CHECK_OK(mtc_plan_wait(done));
  mtc_leaf_result results[LEAVES];
  CHECK_OK(mtc_plan_results(done, 0, LEAVES, results));
  CHECK(mtc_ref_adopt(owner, MTC_REF_PLAN, done) != 0);
  for (int i = 0; i < LEAVES; i++) CHECK(mtc_ref_retain_block(owner, results[i].block) != 0);
  CHECK(mtc_ref_adopt(second, MTC_REF_PLAN, submitted_plan(1)) != 0);
  if (early) CHECK_OK(mtc_owner_release(second));
  return (void *)(uintptr_t)owner;
}

static void test_thread_exit(void) {
  mtc_stats before = checked_stats();
  for (int early = 0; early < 2; early++) {
    fake.set_copy_delay_us(early ? 0 : 20 * 1000);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, holding_thread, early ? (void *)1 : NULL) == 0);
    void *owner = NULL;
    pthread_join(thread, &owner);
    CHECK(mtc_owner_alive((mtc_owner)(uintptr_t)owner) == 0);
    check_counters(&before);
  }
  fake.set_copy_delay_us(0);
}

/* A released owner's copy in flight is waited for. */
static void test_plan_in_flight(void) {
  mtc_stats before = checked_stats();
  mtc_owner owner = new_owner(0, 0);
  fake.set_copy_delay_us(50 * 1000);
  mtc_plan *plan = submitted_plan(0);
  CHECK(mtc_ref_adopt(owner, MTC_REF_PLAN, plan) != 0);
  double t0 = now_ms();
  CHECK_OK(mtc_owner_release(owner));
  CHECK(now_ms() - t0 >= 20);
  fake.set_copy_delay_us(0);
  check_counters(&before);
}

static atomic_int waiter_done;

static void *waiter(void *plan) {
  mtc_status status = mtc_plan_wait_device(plan);
  atomic_store(&waiter_done, 1);
  return (void *)(uintptr_t)status;
}

/* Until the waiter counts itself in the plan (it is inside its wait) or
 * has returned already. */
static void await_waiter(mtc_plan *plan) {
  for (;;) {
    pthread_mutex_lock(&plan->lock);
    int inside = plan->waiters > 0;
    pthread_mutex_unlock(&plan->lock);
    if (inside || atomic_load(&waiter_done)) return;
    sleep_ms(1);
  }
}

/* A plan waited on by another thread (a runtime's FFI pool) while its
 * owner releases it: the release lets the wait finish first. */
static void test_release_racing_wait(void) {
  mtc_stats before = checked_stats();
  for (int round = 0; round < 6; round++) {
    mtc_owner owner = new_owner(0, 0);
    fake.set_copy_delay_us(round % 2 ? 30 * 1000 : 2 * 1000);
    mtc_plan *plan = submitted_plan((uint32_t)(round / 2) % 2);
    mtc_ref ref = mtc_ref_adopt(owner, MTC_REF_PLAN, plan);
    pthread_t thread;
    atomic_store(&waiter_done, 0);
    CHECK(pthread_create(&thread, NULL, waiter, plan) == 0);
    await_waiter(plan);
    if (round < 4) CHECK_OK(mtc_owner_release(owner));
    else mtc_ref_release(ref);
    void *status = NULL;
    pthread_join(thread, &status);
    /* Releasing the owner stops the plan's reads first: a copy not staged
     * by then (a loaded machine, a sanitizer build) ends with
     * MTC_ERR_INVALID_STATE, which the wait reports. Either way it returns,
     * and the plan was not freed under it (ASan would say). */
    mtc_status got = (mtc_status)(uintptr_t)status;
    CHECK(got == MTC_OK || (round < 4 && got == MTC_ERR_INVALID_STATE));
    if (round >= 4) CHECK_OK(mtc_owner_release(owner));
  }
  fake.set_copy_delay_us(0);
  check_counters(&before);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  void *handle = fake_open(driver);
  if (handle == NULL) return check_summary(SUITE);
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  CHECK(fake.set_copy_delay_us != NULL);
  if (fake.set_copy_delay_us == NULL) return check_summary(SUITE);
  for (size_t i = 0; i < sizeof source; i++) source[i] = (uint8_t)(i * 7);

  mtc_stats before = checked_stats();
  test_kinds();
  test_ended_owners();
  test_move_and_take();
  test_drop_parcels();
  test_thread_exit();
  test_plan_in_flight();
  test_release_racing_wait();
  check_counters(&before);
  CHECK_EQ_U64(mtc_parcels_live(), 0);
  return check_summary(SUITE);
}
