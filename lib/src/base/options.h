/* options.h — checking mtc_options and filling in defaults. */
#ifndef MTC_OPTIONS_H
#define MTC_OPTIONS_H

#include "mtc.h"

/* The struct_size of version 0.1's mtc_options, the smallest accepted. */
#define MTC_OPTIONS_V1_SIZE 56u

/* Copies the caller's options (NULL = defaults) into *out at the current
 * size: fields past the caller's struct_size take their defaults. Returns
 * MTC_ERR_INVALID_ARGUMENT, with the thread's last error set, for values out
 * of range. */
mtc_status mtc_options_normalize(const mtc_options *in, mtc_options *out);

#endif
