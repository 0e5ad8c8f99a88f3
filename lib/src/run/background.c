/* background.c — a single worker thread with a FIFO queue. One thread (not
 * a pool) keeps submissions in order: plans reach the copy streams in the
 * order they were submitted. */
#include "run/background.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "cuda/device.h"
#include "base/keep_loaded.h"
#include "base/clock.h"
#include "base/spin.h"

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER;
static mtc_background_item *head, *tail;
/* Items in the queue, readable without the lock (for the idle spin). */
static atomic_size_t queued_count;
/* Items ever queued, and ever run to the end: a plan submitted on its own
 * thread waits until every item queued before it has run (drain). */
static atomic_ulong enqueued_total, finished_total;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;

static void *background_main(void *arg) {
  (void)arg;
  mtc_device_mark_library_thread();
  pthread_mutex_lock(&lock);
  for (;;) {
    /* Copies often come back to back (a loader's loop): spin briefly
     * before sleeping, so the next one starts without a wake-up. */
    if (head == NULL) {
      pthread_mutex_unlock(&lock);
      uint64_t spin_until = mtc_clock_ns() + mtc_spin_ns();
      while (atomic_load_explicit(&queued_count, memory_order_acquire) == 0 &&
             mtc_clock_ns() < spin_until) {
        mtc_cpu_relax();
      }
      pthread_mutex_lock(&lock);
    }
    while (head == NULL) pthread_cond_wait(&queued, &lock);
    mtc_background_item *item = head;
    head = item->next;
    if (head == NULL) tail = NULL;
    atomic_fetch_sub_explicit(&queued_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    /* After run() the item may be freed by its owner: do not touch it. */
    item->run(item);
    pthread_mutex_lock(&lock);
    atomic_fetch_add_explicit(&finished_total, 1, memory_order_release);
    pthread_cond_broadcast(&finished);
  }
  return NULL;
}

static void start_thread(void) {
  mtc_keep_loaded();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  started = pthread_create(&thread, &attr, background_main, NULL) == 0;
  /* Named for debuggers, top and the trace file (it never exits). */
  if (started) pthread_setname_np(thread, "mtc background");
  pthread_attr_destroy(&attr);
}

int mtc_background_enqueue(mtc_background_item *item) {
  pthread_once(&start_once, start_thread);
  if (!started) return -1;
  item->next = NULL;
  pthread_mutex_lock(&lock);
  if (tail != NULL) {
    tail->next = item;
  } else {
    head = item;
  }
  tail = item;
  atomic_fetch_add_explicit(&queued_count, 1, memory_order_release);
  atomic_fetch_add_explicit(&enqueued_total, 1, memory_order_release);
  pthread_cond_signal(&queued);
  pthread_mutex_unlock(&lock);
  return 0;
}

void mtc_background_drain(void) {
  unsigned long target =
      atomic_load_explicit(&enqueued_total, memory_order_acquire);
  if (atomic_load_explicit(&finished_total, memory_order_acquire) >= target) {
    return; /* the usual case: nothing queued */
  }
  pthread_mutex_lock(&lock);
  while (atomic_load_explicit(&finished_total, memory_order_acquire) < target) {
    pthread_cond_wait(&finished, &lock);
  }
  pthread_mutex_unlock(&lock);
}
