/* transfer.h — carrying out a laid-out plan: allocate output blocks, stage
 * host leaves, enqueue the DMA on the copy streams, record completion
 * events. Runs on the submitting thread or the background thread. */
#ifndef MTC_TRANSFER_H
#define MTC_TRANSFER_H

#include "plan.h"

/* Fills plan->blocks, staging, events, held_events and results. On failure
 * waits for whatever it had enqueued, releases everything it acquired, and
 * returns the status with the thread's last error set. */
mtc_status mtc_transfer_run(mtc_plan *plan);

/* Gives the plan's staging memory back to its pools (idempotent). The
 * copies that read it must have completed. */
void mtc_transfer_return_staging(mtc_plan *plan);

#endif
