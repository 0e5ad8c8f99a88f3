/* into.h — carrying out a plan of copies into existing memory
 * (mtc_plan_add_leaves_into), for transfer.c. */
#ifndef MTC_RUN_INTO_H
#define MTC_RUN_INTO_H

#include "run/transfer_context.h"

/* Enqueues every leaf's copy into its destination (host -> host ones are
 * done on return); for device -> host leaves, the pinned blocks they land
 * in go to chunk_blocks / own_blocks and plan->copy_out says where each is
 * copied out to. The thread's last error and t->failed_leaf on failure. */
mtc_status mtc_into_run(mtc_transfer *t, const mtc_chunk_members *members,
                        mtc_block **chunk_blocks, mtc_block **own_blocks);

/* Each leaf's result: its destination (MTC_RESULT_INTO, no block). */
void mtc_into_fill_results(mtc_plan *plan);

#endif
