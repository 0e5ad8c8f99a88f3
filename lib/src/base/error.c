/* error.c — per-thread last-error buffer. Thread-local so that plans used on
 * different threads never overwrite each other's messages. */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[MTC_ERROR_CAPACITY];

mtc_status mtc_error_set(mtc_status status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
  return status;
}

mtc_status mtc_error_set_text(mtc_status status, const char *text) {
  /* text may be this very buffer (copying a plan's message back). */
  if (text != last_error) {
    snprintf(last_error, sizeof last_error, "%s", text ? text : "");
  }
  return status;
}

const char *mtc_error_text(void) { return last_error; }

void mtc_format(char *dst, size_t capacity, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(dst, capacity, format, args);
  va_end(args);
}
