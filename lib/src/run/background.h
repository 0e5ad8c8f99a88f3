/* background.h — the library's one background thread, which runs submitted
 * work items in FIFO order so that mtc_plan_submit can return at once. */
#ifndef MTC_BACKGROUND_H
#define MTC_BACKGROUND_H

typedef struct mtc_background_item {
  void (*run)(struct mtc_background_item *item);
  struct mtc_background_item *next; /* owned by the queue */
} mtc_background_item;

/* Queues item; the thread calls item->run(item) later. Returns 0, or -1 if
 * the thread could not be started (then the caller runs the work itself). */
int mtc_background_enqueue(mtc_background_item *item);

/* Returns once every item queued before this call has run: a plan carried
 * out on its caller's thread then reaches the copy streams after the plans
 * submitted before it, as if they had all gone through the queue. Never
 * call it from the background thread itself. */
void mtc_background_drain(void);

#endif
