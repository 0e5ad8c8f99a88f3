/* header_c.c — mtc.h compiles as strict C11 on its own, and
 * MTC_OPTIONS_INIT matches mtc_options_init. */
#include "mtc.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  mtc_options from_macro = MTC_OPTIONS_INIT;
  mtc_options from_call;
  memset(&from_call, 0, sizeof from_call);
  mtc_options_init(&from_call);
  int ok = memcmp(&from_macro, &from_call, sizeof from_call) == 0 &&
           sizeof(mtc_leaf) == 40 && sizeof(mtc_leaf_result) == 32 &&
           sizeof(mtc_options) == 56 && sizeof(mtc_stats) == 128 &&
           mtc_version_number() == MTC_VERSION_NUMBER;
  printf("header_c: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
