/* staging_pool.h — the one shared pool of threads that stage host memory
 * (gather leaves into staging buffers) in parallel. Sized from
 * MTC_STAGING_THREADS, else min(hardware threads, 8); created on first use. */
#ifndef MTC_STAGING_POOL_H
#define MTC_STAGING_POOL_H

#include <stddef.h>

typedef void (*mtc_task_fn)(void *context, size_t task);

/* Threads that stage at once, the calling thread included (>= 1). Does not
 * start the pool. */
unsigned mtc_staging_pool_size(void);

/* Runs fn(context, 0 .. task_count-1) on up to max_threads threads (0 = the
 * whole pool), the calling thread among them, and returns when all tasks
 * have finished. Tasks should be big (hundreds of KiB of copying each). */
void mtc_staging_parallel_for(size_t task_count, unsigned max_threads,
                              mtc_task_fn fn, void *context);

#endif
