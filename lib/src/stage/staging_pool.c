/* staging_pool.c — worker threads and a blocking "parallel for". One mutex
 * guards everything: tasks are large, so taking it per task costs nothing
 * measurable, and it keeps the hand-off between threads easy to trust.
 * A copy stages piece after piece, microseconds apart, and waking a sleeping
 * thread costs tens of microseconds: so an idle worker, and a caller waiting
 * for its helpers, spin for MTC_SPIN_US (spin.h) before they sleep. */
#include "stage/staging_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/env.h"
#include "base/keep_loaded.h"
#include "base/spin.h"
#include "cuda/device.h"

#define MAX_POOL_THREADS 256

typedef struct staging_job {
  mtc_task_fn fn;
  void *context;
  size_t task_count;
  size_t next_task;      /* next index to hand out */
  size_t helper_slots;   /* workers that may still join */
  /* Changed under the lock; read without it by a spinning caller. */
  atomic_size_t completed;      /* tasks finished */
  atomic_size_t active_helpers; /* workers inside the job right now */
  struct staging_job *next;
} staging_job;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static unsigned pool_size = 1; /* threads incl. the caller */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t job_done = PTHREAD_COND_INITIALIZER;
static staging_job *queue_head, *queue_tail;
/* Jobs in the queue, readable without the lock (for the idle spin). */
static atomic_size_t queued_jobs;

static void configure(void) {
  uint64_t threads = 0;
  /* Unset, 0 or malformed ("-2", " 4"): the default. */
  if (!mtc_parse_count(getenv("MTC_STAGING_THREADS"), &threads)) threads = 0;
  if (threads == 0) {
    long hardware = sysconf(_SC_NPROCESSORS_ONLN);
    threads = hardware > 0 ? (uint64_t)hardware : 1;
    if (threads > 8) threads = 8;
  }
  if (threads > MAX_POOL_THREADS) threads = MAX_POOL_THREADS;
  pool_size = (unsigned)threads;
}

unsigned mtc_staging_pool_size(void) {
  pthread_once(&config_once, configure);
  return pool_size;
}

static void unlink_job(staging_job *job) {
  staging_job **link = &queue_head;
  staging_job *prev = NULL;
  while (*link != NULL && *link != job) {
    prev = *link;
    link = &(*link)->next;
  }
  if (*link == NULL) return;
  *link = job->next;
  if (queue_tail == job) queue_tail = prev;
  job->next = NULL;
  atomic_fetch_sub_explicit(&queued_jobs, 1, memory_order_relaxed);
}

/* Spins (the lock released) until `done` says so or MTC_SPIN_US passed. */
static void spin_unlocked(int (*done)(const void *), const void *arg) {
  uint64_t spin = mtc_spin_ns();
  if (spin == 0) return;
  pthread_mutex_unlock(&lock);
  uint64_t until = mtc_clock_ns() + spin;
  while (!done(arg) && mtc_clock_ns() < until) mtc_cpu_relax();
  pthread_mutex_lock(&lock);
}

static int work_queued(const void *arg) {
  (void)arg;
  return atomic_load_explicit(&queued_jobs, memory_order_acquire) != 0;
}

static int job_finished(const void *arg) {
  const staging_job *job = arg;
  return atomic_load_explicit(&job->completed, memory_order_acquire) == job->task_count &&
         atomic_load_explicit(&job->active_helpers, memory_order_acquire) == 0;
}

/* Runs tasks of job until none is left to claim. Called with lock held. */
static void run_tasks_locked(staging_job *job) {
  while (job->next_task < job->task_count) {
    size_t task = job->next_task++;
    pthread_mutex_unlock(&lock);
    job->fn(job->context, task);
    pthread_mutex_lock(&lock);
    atomic_fetch_add_explicit(&job->completed, 1, memory_order_release);
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  mtc_device_mark_library_thread();
  pthread_mutex_lock(&lock);
  for (;;) {
    if (queue_head == NULL) spin_unlocked(work_queued, NULL);
    while (queue_head == NULL) pthread_cond_wait(&work_ready, &lock);
    staging_job *job = queue_head;
    if (--job->helper_slots == 0) unlink_job(job);
    atomic_fetch_add_explicit(&job->active_helpers, 1, memory_order_relaxed);
    run_tasks_locked(job);
    /* Nothing left to claim: no one else should join this job. */
    unlink_job(job);
    /* The job may end (its caller's stack frame) once this reaches 0. */
    if (atomic_fetch_sub_explicit(&job->active_helpers, 1, memory_order_release) == 1) {
      pthread_cond_broadcast(&job_done);
    }
  }
  return NULL;
}

static void start_workers(void) {
  mtc_keep_loaded();
  unsigned workers = mtc_staging_pool_size() - 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (unsigned i = 0; i < workers; i++) {
    pthread_t thread;
    /* A worker that cannot start only makes staging slower. */
    if (pthread_create(&thread, &attr, worker_main, NULL) != 0) break;
  }
  pthread_attr_destroy(&attr);
}

void mtc_staging_parallel_for(size_t task_count, unsigned max_threads,
                              mtc_task_fn fn, void *context) {
  if (task_count == 0) return;
  unsigned threads = mtc_staging_pool_size();
  if (max_threads != 0 && max_threads < threads) threads = max_threads;
  if ((size_t)threads > task_count) threads = (unsigned)task_count;

  if (threads <= 1) {
    for (size_t i = 0; i < task_count; i++) fn(context, i);
    return;
  }
  pthread_once(&start_once, start_workers);

  staging_job job = {
      .fn = fn,
      .context = context,
      .task_count = task_count,
      .helper_slots = threads - 1,
  };
  pthread_mutex_lock(&lock);
  if (queue_tail != NULL) {
    queue_tail->next = &job;
  } else {
    queue_head = &job;
  }
  queue_tail = &job;
  atomic_fetch_add_explicit(&queued_jobs, 1, memory_order_release);
  pthread_cond_broadcast(&work_ready);

  run_tasks_locked(&job);
  unlink_job(&job);
  /* job lives on this stack: wait until no worker can touch it again. */
  if (!job_finished(&job)) spin_unlocked(job_finished, &job);
  while (!job_finished(&job)) pthread_cond_wait(&job_done, &lock);
  pthread_mutex_unlock(&lock);
}
