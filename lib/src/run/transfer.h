/* transfer.h — carrying out a laid-out plan: allocate output blocks, stage
 * host leaves, enqueue the DMA on the copy streams, record completion
 * events. Runs on the submitting thread or the background thread. */
#ifndef MTC_TRANSFER_H
#define MTC_TRANSFER_H

#include "run/in_flight.h"

/* Fills plan->blocks, staging, completion, held_events and results, and
 * writes what it did to the submission's fields of *stats (blocks,
 * copies_issued, pinned_*, staging_ns, submit_ns, device_to_host_path).
 * Before its copies read leaves of a device whose stream the caller set,
 * the copy stream waits on that stream's ready event; when the caller set a
 * stream on the target, that stream waits on the completion event. On
 * failure waits for whatever it had enqueued, releases everything it
 * acquired, and returns the status with the thread's last error set and
 * *failed_leaf the leaf it was working on: a leaf copied on its own, or the
 * first leaf of a packed chunk (the message then says how many it packs);
 * -1 where no one leaf was at fault. */
mtc_status mtc_transfer_run(mtc_plan *plan, mtc_plan_stats *stats,
                            int64_t *failed_leaf);

#endif
