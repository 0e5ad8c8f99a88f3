/* exit.c — the library's own layer of the exit path. A runtime or program
 * that ends while the background thread still stages leaves may free that
 * memory on the way out (Deno frees its heap, a C program's exit handlers
 * free what they own). Bindings stop their plans' reads from their runtime's
 * exit events; this handler is the layer under them: exit() and
 * quick_exit() run it before the handlers registered earlier than libmtc's
 * first plan, that is, before those of the runtime or program that loaded
 * it. It cannot run before a runtime that frees memory first and exits
 * after (Deno after an uncaught error): that case needs the events. */
#include "plan/exit.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/keep_loaded.h"

/* How long the handler waits for a read in progress (a memcpy or a
 * pageable driver copy), per plan. */
#define EXIT_WAIT_MS 10000u

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mtc_plan *live;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void stop_every_plan(void) {
  pthread_mutex_lock(&live_lock);
  for (mtc_plan *plan = live; plan != NULL; plan = plan->live_next) {
    (void)mtc_plan_read_stop(plan, EXIT_WAIT_MS);
  }
  pthread_mutex_unlock(&live_lock);
}

static void install(void) {
  /* The handler's code must still be mapped when the process exits, even
   * if the runtime dlclose()d libmtc long before. */
  mtc_keep_loaded();
  (void)atexit(stop_every_plan);
  (void)at_quick_exit(stop_every_plan);
}

void mtc_plan_track(mtc_plan *plan) {
  pthread_once(&once, install);
  pthread_mutex_lock(&live_lock);
  plan->live_prev = NULL;
  plan->live_next = live;
  if (live != NULL) live->live_prev = plan;
  live = plan;
  pthread_mutex_unlock(&live_lock);
}

void mtc_plan_untrack(mtc_plan *plan) {
  pthread_mutex_lock(&live_lock);
  if (plan->live_prev != NULL) plan->live_prev->live_next = plan->live_next;
  else if (live == plan) live = plan->live_next;
  if (plan->live_next != NULL) plan->live_next->live_prev = plan->live_prev;
  plan->live_prev = plan->live_next = NULL;
  pthread_mutex_unlock(&live_lock);
}
