/* prepared_tables.h — the scatter tables of a prepared copy into device
 * memory, written to the target once (prepared.c) and read by every copy
 * of it (run/into.c). */
#ifndef MTC_PLAN_PREPARED_TABLES_H
#define MTC_PLAN_PREPARED_TABLES_H

#include "layout/planner.h"
#include "memory/block.h"

/* A device block on `target` holding one segment per packed member of
 * `layout` (in chunk order, each chunk's leaves in leaf order, as
 * mtc_chunk_members_group lists them): for a host chunk of at least
 * MTC_INTO_KERNEL_MIN_LEAVES leaves, {offset in the chunk, the leaf's
 * destination, bytes}; zeros elsewhere. NULL when no chunk would use it,
 * when the target has no kernels, or when it cannot be made (the copies
 * then stage their tables as before); the thread's last error is left as
 * it was. The block is ready to read from any stream when this returns. */
mtc_block *mtc_prepared_tables_make(int32_t target, const mtc_layout *layout,
                                    const mtc_leaf *leaves,
                                    const mtc_leaf *destinations,
                                    uint64_t leaf_count);

#endif
