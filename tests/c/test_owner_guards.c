/* test_owner_guards.c — mtc_owner_alive says 1 until everything an ended
 * owner held has been released, so that a 0 means it is all back (a
 * loader's dropMovedFrom and a worker's end rely on that). An owner ends
 * by mtc_owner_release or by its thread's exit (MTC_OWNER_THREAD); either
 * way, a plan it held is waited for outside the owners' lock. The emulated
 * driver (its path in argv[1]) keeps that wait inside cuEventSynchronize
 * for a while (fake_cuda_set_sync_linger_us), so the test asks
 * mtc_owner_alive while the release is provably under way: the owner has
 * ended (its refs are unknown) and must still read as alive. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"

#define SUITE "test_owner_guards"

/* How long a wait stays in the driver: far longer than the test needs to
 * see it there, on any machine. */
#define LINGER_US 1000000ull

static struct {
  void (*set_sync_linger_us)(unsigned long long);
  int (*synchronizes_in_progress)(void);
} fake;

static uint8_t source[4096];

/* A copy of `source` to cuda:0, enqueued before this returns, so that
 * releasing the plan waits on its completion event. */
static mtc_plan *plan_in_flight(void) {
  mtc_options here = MTC_OPTIONS_INIT;
  here.use_background_thread = 0;
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, &here, &plan));
  mtc_leaf leaf = make_leaf(host_address(source), sizeof source, 4, MTC_DEVICE_CPU);
  CHECK_OK(mtc_plan_add_leaves(plan, &leaf, 1));
  CHECK_OK(mtc_plan_submit(plan));
  return plan;
}

struct ending {
  mtc_owner owner; /* released by the thread, or the thread's own */
  int thread_owned;
  atomic_int published; /* the thread's own owner is in `owner` */
};

static void *end_owner(void *arg) {
  struct ending *e = arg;
  if (e->thread_owned) {
    CHECK_OK(mtc_owner_create(MTC_OWNER_THREAD, 0, &e->owner));
    CHECK(mtc_ref_adopt(e->owner, MTC_REF_PLAN, plan_in_flight()) != 0);
    atomic_store(&e->published, 1);
    /* Returning ends the thread: its owner is released on the way out. */
  } else {
    CHECK_OK(mtc_owner_release(e->owner));
  }
  return NULL;
}

/* Ends an owner holding a plan in flight on another thread, and checks it
 * reads as alive while the plan's release is inside the driver's wait, and
 * as ended once the thread is through. */
static void alive_until_released(int thread_owned) {
  mtc_stats before = checked_stats();
  struct ending e = {0};
  e.thread_owned = thread_owned;
  if (!thread_owned) {
    CHECK_OK(mtc_owner_create(0, 0, &e.owner));
    CHECK(mtc_ref_adopt(e.owner, MTC_REF_PLAN, plan_in_flight()) != 0);
  }
  fake.set_sync_linger_us(LINGER_US);
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, end_owner, &e) == 0);
  /* Until the release is seen in the driver's wait (it stays there for a
   * second), or the thread is gone (a thread's own owner is released as it
   * exits, after its function returned). */
  int inside = 0, joined = 0;
  while (!(inside = fake.synchronizes_in_progress() > 0) && !(joined = pthread_tryjoin_np(thread, NULL) == 0)) {
    sched_yield();
  }
  CHECK(inside);
  if (inside) {
    CHECK(!thread_owned || atomic_load(&e.published));
    CHECK(mtc_owner_ref_count(e.owner) == -1); /* it has ended ... */
    CHECK(mtc_owner_alive(e.owner) == 1);      /* ... but its plan is not released yet */
  }
  if (!joined) pthread_join(thread, NULL);
  fake.set_sync_linger_us(0);
  CHECK(mtc_owner_alive(e.owner) == 0);
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  void *handle = fake_open(driver);
  if (handle != NULL) {
    FAKE_SYM(handle, fake.set_sync_linger_us, "fake_cuda_set_sync_linger_us");
    FAKE_SYM(handle, fake.synchronizes_in_progress, "fake_cuda_synchronizes_in_progress");
  }
  if (fake.set_sync_linger_us == NULL || fake.synchronizes_in_progress == NULL) {
    check_skip(SUITE, "needs the emulated driver's fake_cuda_set_sync_linger_us");
    return check_summary(SUITE);
  }
  for (size_t i = 0; i < sizeof source; i++) source[i] = (uint8_t)(i * 13);
  alive_until_released(0); /* mtc_owner_release */
  alive_until_released(1); /* the thread's exit */
  CHECK_EQ_U64(mtc_parcels_live(), 0);
  return check_summary(SUITE);
}
