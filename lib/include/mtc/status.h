/* mtc/status.h — mtc_status, its names, and the last error of the calling
 * thread.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_STATUS_H
#define MTC_PUBLIC_STATUS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/status.h"
#endif

/* ----------------------------------------------------------------- status */

typedef enum mtc_status {
  MTC_OK = 0,
  /* mtc_plan_poll: the copy has not finished yet. Not an error. */
  MTC_IN_PROGRESS = 1,
  /* A bad argument: NULL where a value is needed, a size or alignment out of
   * range, a leaf that does not describe memory. */
  MTC_ERR_INVALID_ARGUMENT = 2,
  /* The call does not fit the plan's state (adding leaves after submit,
   * reading results before the copy finished, submitting twice). */
  MTC_ERR_INVALID_STATE = 3,
  /* The CUDA driver could not be loaded or initialised. */
  MTC_ERR_NO_DRIVER = 4,
  /* The CUDA device ordinal does not exist on this machine. */
  MTC_ERR_NO_DEVICE = 5,
  /* A host, pinned or device allocation failed. */
  MTC_ERR_OUT_OF_MEMORY = 6,
  /* Any other error reported by the CUDA driver; the message names it. */
  MTC_ERR_CUDA = 7,
  /* A valid request this build cannot serve. */
  MTC_ERR_UNSUPPORTED = 8,
  /* A bug in libmtc. */
  MTC_ERR_INTERNAL = 9
} mtc_status;

/* Returns a static name for a status ("MTC_OK", ...); "MTC_UNKNOWN_STATUS"
 * for values outside the enum. Any thread. */
MTC_API const char *mtc_status_name(int32_t status);

/* Returns the message of the last failed call made on this thread, or "" if
 * none failed yet. The string stays valid until the next libmtc call on the
 * same thread. */
MTC_API const char *mtc_last_error(void);

#endif /* MTC_PUBLIC_STATUS_H */
