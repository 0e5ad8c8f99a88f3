/* env.h — the environment knobs libmtc reads (MTC_SPIN_US, MTC_TRACE,
 * MTC_STAGING_THREADS, MTC_PINNED_LIMIT), parsed one strict way: a value
 * that is not exactly what the knob takes is ignored as if unset (the
 * default applies), never read as something else. */
#ifndef MTC_BASE_ENV_H
#define MTC_BASE_ENV_H

#include <stdint.h>

/* A switch: 1 for "1", "true", "yes", "on"; 0 for "0", "false", "no",
 * "off" (either in any letter case); -1 for unset, empty or anything else. */
int mtc_parse_flag(const char *text);

/* A count: decimal digits only (no sign, space or other text), at most
 * UINT64_MAX. Returns 1 and sets *value when well formed, else 0. */
int mtc_parse_count(const char *text, uint64_t *value);

/* A byte size: a count with an optional binary suffix k, m, g or t (either
 * case: KiB, MiB, GiB, TiB). Returns 1 and sets *bytes when well formed and
 * it fits 64 bits, else 0. */
int mtc_parse_bytes(const char *text, uint64_t *bytes);

/* mtc_parse_flag(getenv(name)). */
int mtc_env_flag(const char *name);

#endif
