/* in_flight.c — the end of a copy in flight, and the list of plans whose
 * copies are in flight with pinned staging (see in_flight.h).
 *
 * Lock order: a plan's lock, then the list's lock. A thread that settles a
 * plan found on the list first counts itself in the plan's flight_pins
 * (under the list's lock), lets go of the list, and only then takes the
 * plan's lock; release takes the plan off the list and waits for the pins
 * to drop before it frees the plan. */
#include "run/in_flight.h"

#include <stdlib.h>
#include <time.h>

#include "cuda/driver.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static mtc_plan *oldest, *newest;

/* List lock held. */
static void unlink_locked(mtc_plan *plan) {
  if (!plan->flight_listed) return;
  if (plan->flight_prev != NULL) plan->flight_prev->flight_next = plan->flight_next;
  else oldest = plan->flight_next;
  if (plan->flight_next != NULL) plan->flight_next->flight_prev = plan->flight_prev;
  else newest = plan->flight_prev;
  plan->flight_prev = plan->flight_next = NULL;
  plan->flight_listed = 0;
}

void mtc_in_flight_add_locked(mtc_plan *plan) {
  if (plan->staging_count == 0) return;
  pthread_mutex_lock(&list_lock);
  if (!plan->flight_listed) {
    plan->flight_prev = newest;
    plan->flight_next = NULL;
    if (newest != NULL) newest->flight_next = plan;
    else oldest = plan;
    newest = plan;
    plan->flight_listed = 1;
  }
  pthread_mutex_unlock(&list_lock);
}

void mtc_transfer_return_staging(mtc_plan *plan) {
  pthread_mutex_lock(&list_lock);
  unlink_locked(plan);
  pthread_mutex_unlock(&list_lock);
  for (size_t i = 0; i < plan->staging_count; i++) {
    mtc_plan_staging *s = &plan->staging[i];
    if (s->pinned.ptr != NULL) {
      mtc_pinned_release(&s->pinned);
    } else {
      free(s->host);
    }
  }
  plan->staging_count = 0;
}

void mtc_plan_complete_locked(mtc_plan *plan) {
  if (plan->phase != MTC_PHASE_IN_FLIGHT) return;
  /* Copies into host destinations are not written here: this may be
   * another copy's thread settling plans at the pinned pool's limit. The
   * caller's own poll or wait writes them (plan/wait.c). */
  mtc_transfer_return_staging(plan);
  plan->phase = MTC_PHASE_DONE;
}

void mtc_plan_fail_locked(mtc_plan *plan, CUresult result, const char *what) {
  if (plan->phase != MTC_PHASE_IN_FLIGHT) return;
  plan->status = mtc_cuda_fail(result, what);
  mtc_plan_record_error_locked(plan, -1);
  plan->phase = MTC_PHASE_FAILED;
  mtc_transfer_return_staging(plan);
}

void mtc_in_flight_forget(mtc_plan *plan) {
  pthread_mutex_lock(&list_lock);
  unlink_locked(plan);
  pthread_mutex_unlock(&list_lock);
  while (atomic_load(&plan->flight_pins) != 0) {
    struct timespec pause = {0, 20 * 1000};
    nanosleep(&pause, NULL);
  }
}

/* Ends the oldest listed plan's copy if it is over (with `wait`, once it
 * is). 1 when it ended one (or found it ended already), 0 otherwise. The
 * thread's last error is left as it was: a failure belongs to that plan. */
static int settle_oldest(int wait) {
  pthread_mutex_lock(&list_lock);
  mtc_plan *plan = oldest;
  if (plan != NULL) atomic_fetch_add(&plan->flight_pins, 1);
  pthread_mutex_unlock(&list_lock);
  if (plan == NULL) return 0;

  char saved[MTC_ERROR_CAPACITY];
  mtc_format(saved, sizeof saved, "%s", mtc_error_text());
  const mtc_cuda_api *cu = NULL;
  int ended = 0;
  pthread_mutex_lock(&plan->lock);
  if (plan->phase != MTC_PHASE_IN_FLIGHT) {
    mtc_transfer_return_staging(plan); /* listed by mistake: let it go */
    ended = 1;
  } else if (mtc_cuda_load(&cu) == MTC_OK) {
    CUresult r = cu->cuEventQuery(plan->completion->event);
    if (r == CUDA_ERROR_NOT_READY && wait) {
      /* Synchronize without the plan's lock (poll must not block); the
       * event reference keeps it alive meanwhile. */
      mtc_event *event = plan->completion;
      mtc_event_retain(event);
      pthread_mutex_unlock(&plan->lock);
      r = cu->cuEventSynchronize(event->event);
      mtc_event_release(event);
      pthread_mutex_lock(&plan->lock);
    }
    if (plan->phase != MTC_PHASE_IN_FLIGHT) {
      ended = 1; /* its owner polled it meanwhile */
    } else if (r == CUDA_SUCCESS) {
      mtc_plan_complete_locked(plan);
      ended = 1;
    } else if (r != CUDA_ERROR_NOT_READY) {
      mtc_plan_fail_locked(plan, r, "cuEventQuery");
      ended = 1;
    }
  }
  pthread_mutex_unlock(&plan->lock);
  atomic_fetch_sub(&plan->flight_pins, 1);
  mtc_error_set_text(MTC_OK, saved);
  return ended;
}

int mtc_in_flight_settle(int wait) {
  int ended = 0;
  while (settle_oldest(0)) ended++;
  if (ended == 0 && wait) ended = settle_oldest(1);
  return ended;
}
