/* env.c — strict parsing of the environment knobs (see env.h). */
#include "base/env.h"

#include <stdlib.h>
#include <strings.h>

int mtc_parse_flag(const char *text) {
  if (text == NULL) return -1;
  static const char *const on[] = {"1", "true", "yes", "on"};
  static const char *const off[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    if (strcasecmp(text, on[i]) == 0) return 1;
    if (strcasecmp(text, off[i]) == 0) return 0;
  }
  return -1;
}

int mtc_parse_count(const char *text, uint64_t *value) {
  if (text == NULL || *text == '\0') return 0;
  uint64_t n = 0;
  for (const char *p = text; *p != '\0'; p++) {
    /* strtoul would take "-1" (wrapping to the maximum), " 5" and "+5". */
    if (*p < '0' || *p > '9') return 0;
    unsigned digit = (unsigned)(*p - '0');
    if (n > (UINT64_MAX - digit) / 10) return 0;
    n = n * 10 + digit;
  }
  *value = n;
  return 1;
}

int mtc_parse_bytes(const char *text, uint64_t *bytes) {
  if (text == NULL) return 0;
  char digits[24];
  size_t length = 0;
  while (text[length] >= '0' && text[length] <= '9') {
    if (length + 1 >= sizeof digits) return 0; /* more digits than 64 bits hold */
    digits[length] = text[length];
    length++;
  }
  digits[length] = '\0';
  int shift = 0;
  switch (text[length]) {
    case '\0': break;
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: return 0;
  }
  if (shift != 0 && text[length + 1] != '\0') return 0;
  uint64_t value;
  if (!mtc_parse_count(digits, &value) || value > (UINT64_MAX >> shift)) return 0;
  *bytes = value << shift;
  return 1;
}

int mtc_env_flag(const char *name) {
  return mtc_parse_flag(getenv(name));
}
