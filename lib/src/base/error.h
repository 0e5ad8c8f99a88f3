/* error.h — the thread-local "last error" message behind mtc_last_error(). */
#ifndef MTC_ERROR_H
#define MTC_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "mtc.h"

/* Longest message kept; longer ones are cut. */
#define MTC_ERROR_CAPACITY 512

/* Formats a message into this thread's last-error buffer and returns
 * status, so that failures read as `return mtc_error_set(MTC_ERR_..., ...)`. */
mtc_status mtc_error_set(mtc_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Copies an already formatted message into this thread's buffer. */
mtc_status mtc_error_set_text(mtc_status status, const char *text);

/* This thread's last message ("" when none). */
const char *mtc_error_text(void);

/* snprintf into a fixed buffer that never fails on truncation. */
void mtc_format(char *dst, size_t capacity, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#endif
