/* mtc/version.h — the library's version: MTC_VERSION_*, mtc_version_number,
 * mtc_version_string.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_VERSION_H
#define MTC_PUBLIC_VERSION_H

#ifndef MTC_H
#error "include mtc.h, not mtc/version.h"
#endif

/* ---------------------------------------------------------------- version */

#define MTC_VERSION_MAJOR 0
#define MTC_VERSION_MINOR 1
#define MTC_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH. */
#define MTC_VERSION_NUMBER \
  (MTC_VERSION_MAJOR * 10000 + MTC_VERSION_MINOR * 100 + MTC_VERSION_PATCH)

/* Returns MTC_VERSION_NUMBER of the loaded library, so bindings can check
 * that they loaded the library they were written for. Any thread. */
MTC_API uint32_t mtc_version_number(void);

/* Returns the version as a static string such as "0.1.0". Any thread. */
MTC_API const char *mtc_version_string(void);

#endif /* MTC_PUBLIC_VERSION_H */
