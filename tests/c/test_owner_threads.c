/* test_owner_threads.c — owners used by many threads at once against the
 * emulated driver (its path in argv[1]), for ThreadSanitizer and
 * AddressSanitizer (`zig build test -Dtsan`, `-Dsanitize=address`): each
 * thread keeps its plans and blocks in its own MTC_OWNER_THREAD owner,
 * copies through them, moves result blocks into parcels and hands those to
 * the next thread, which takes them and releases what they carry by the
 * numbers in the message; threads exit with plans in flight and blocks
 * still held, and parcels nobody took are dropped by sender. Every count
 * ends where it began. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "helpers.h"

#define SUITE "test_owner_threads"
enum { THREADS = 8, ROUNDS = 24, LEAVES = 6, LEAF_BYTES = 128, QUEUE = 256 };

/* Read by every copy, written by none once the threads start. */
static uint8_t source[LEAVES * LEAF_BYTES];
static atomic_int failures;
static mtc_owner senders[THREADS];

static void fail_if(int condition) {
  if (condition) atomic_fetch_add(&failures, 1);
}

/* A parcel in transit and the refs it carries, as a message would. */
typedef struct message {
  mtc_owner parcel;
  mtc_ref refs[LEAVES];
  uint32_t count;
} message;

/* Each thread's inbox; the previous thread posts into it. */
static struct inbox {
  pthread_mutex_t lock;
  message items[QUEUE];
  size_t count;
} inboxes[THREADS];

static void post(int to, const message *m) {
  struct inbox *box = &inboxes[to];
  pthread_mutex_lock(&box->lock);
  /* A full inbox loses it, as a closed port would: the drop by sender at
   * the end releases it. */
  if (box->count < QUEUE) box->items[box->count++] = *m;
  pthread_mutex_unlock(&box->lock);
}

static int receive(int at, message *out) {
  struct inbox *box = &inboxes[at];
  pthread_mutex_lock(&box->lock);
  int got = box->count > 0;
  if (got) *out = box->items[--box->count];
  pthread_mutex_unlock(&box->lock);
  return got;
}

/* A plan of LEAVES leaves to cuda:0, adopted by owner and submitted. */
static mtc_plan *start_copy(mtc_owner owner, uint32_t background, mtc_ref *ref) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  mtc_plan *plan = NULL;
  fail_if(mtc_plan_create(0, &o, &plan) != MTC_OK);
  if (plan == NULL) return NULL;
  *ref = mtc_ref_adopt(owner, MTC_REF_PLAN, plan);
  fail_if(*ref == 0);
  mtc_leaf leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(host_address(source + i * LEAF_BYTES), LEAF_BYTES, 4, MTC_DEVICE_CPU);
  }
  fail_if(mtc_plan_add_leaves(plan, leaves, LEAVES) != MTC_OK);
  fail_if(mtc_plan_submit(plan) != MTC_OK);
  return plan;
}

/* Takes what the previous thread sent and releases part of it by number;
 * the rest stays with `owner`. */
static void take_parcels(int me, mtc_owner owner) {
  message m;
  while (receive(me, &m)) {
    fail_if(mtc_owner_take(m.parcel, owner) != MTC_OK);
    fail_if(mtc_owner_take(m.parcel, owner) != MTC_ERR_INVALID_STATE);
    for (uint32_t i = 0; i < m.count; i += 2) mtc_ref_release(m.refs[i]);
  }
}

static void *worker(void *arg) {
  int me = (int)(uintptr_t)arg;
  mtc_owner owner = 0, spare = 0;
  fail_if(mtc_owner_create(MTC_OWNER_THREAD, 0, &owner) != MTC_OK);
  fail_if(mtc_owner_create(MTC_OWNER_THREAD, 0, &spare) != MTC_OK);
  senders[me] = owner;
  mtc_block *pinned = NULL;
  fail_if(mtc_host_block_alloc(0, 4096, &pinned) != MTC_OK);
  fail_if(mtc_ref_adopt(spare, MTC_REF_BLOCK, pinned) == 0);
  for (int r = 0; r < ROUNDS; r++) {
    mtc_ref plan_ref = 0;
    mtc_plan *plan = start_copy(owner, (uint32_t)(r + me) % 2, &plan_ref);
    if (plan == NULL) continue;
    while (mtc_plan_poll(plan) == MTC_IN_PROGRESS) {
    }
    mtc_leaf_result results[LEAVES];
    fail_if(mtc_plan_results(plan, 0, LEAVES, results) != MTC_OK);
    message m = {.count = LEAVES};
    for (int i = 0; i < LEAVES; i++) {
      m.refs[i] = mtc_ref_retain_block(owner, results[i].block);
      fail_if(m.refs[i] == 0);
    }
    mtc_ref_release(plan_ref);
    mtc_ref_release(plan_ref); /* unknown now: ignored */
    if (r % 3 == 0) {
      mtc_ref_release(m.refs[0]); /* kept, then let go */
      continue;
    }
    /* Sent on: the old numbers go inert, the message carries the new. */
    fail_if(mtc_owner_create(MTC_OWNER_PARCEL, owner, &m.parcel) != MTC_OK);
    mtc_ref old = m.refs[0];
    fail_if(mtc_ref_move(owner, m.parcel, m.refs, m.count) != MTC_OK);
    mtc_ref_release(old);
    post((me + 1) % THREADS, &m);
    if (r % 4 == 1) take_parcels(me, r % 8 == 1 ? spare : owner);
  }
  /* Exits holding blocks, the parcels it took, and a copy in flight; one
   * thread in two releases its spare owner itself first. */
  mtc_ref in_flight = 0;
  (void)start_copy(owner, 1, &in_flight);
  if (me % 2) fail_if(mtc_owner_release(spare) != MTC_OK);
  return NULL;
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  for (size_t i = 0; i < sizeof source; i++) source[i] = (uint8_t)(i * 13);
  for (int t = 0; t < THREADS; t++) pthread_mutex_init(&inboxes[t].lock, NULL);
  mtc_stats before = checked_stats();
  uint64_t parcels_before = mtc_parcels_live();

  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    CHECK(pthread_create(&threads[t], NULL, worker, (void *)(uintptr_t)t) == 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);

  /* Every thread's owners went with it; what was still in the inboxes is
   * dropped by sender, as a closed port's messages would be. */
  uint64_t left = mtc_parcels_live() - parcels_before, dropped = 0;
  for (int t = 0; t < THREADS; t++) {
    CHECK(mtc_owner_alive(senders[t]) == 0);
    dropped += mtc_owner_drop_parcels(senders[t]);
  }
  CHECK_EQ_U64(dropped, left);
  CHECK_EQ_U64(mtc_parcels_live(), parcels_before);
  CHECK_EQ_U64((uint64_t)atomic_load(&failures), 0);
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.plans_live, before.plans_live);
  CHECK_EQ_U64(after.blocks_live, before.blocks_live);
  CHECK_EQ_U64(after.device_bytes_live, before.device_bytes_live);
  CHECK_EQ_U64(after.pinned_held_bytes, before.pinned_held_bytes);
  printf("%s: %d threads x %d copies, %llu parcels left untaken and dropped\n", SUITE, THREADS, ROUNDS,
         (unsigned long long)dropped);
  for (int t = 0; t < THREADS; t++) pthread_mutex_destroy(&inboxes[t].lock);
  return check_summary(SUITE);
}
