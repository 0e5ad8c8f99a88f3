/* exit_guard.h — lets a runtime's exit hook stop the library from reading
 * the caller's host memory before the runtime frees it. Every read of a
 * leaf's host memory runs between mtc_host_read_begin and _end; once
 * mtc_prepare_exit has run, no new read begins. */
#ifndef MTC_EXIT_GUARD_H
#define MTC_EXIT_GUARD_H

#include "mtc.h"

/* MTC_OK: go ahead, and call mtc_host_read_end after. After
 * mtc_prepare_exit: MTC_ERR_INVALID_STATE with the last error set. */
mtc_status mtc_host_read_begin(void);
void mtc_host_read_end(void);

#endif
