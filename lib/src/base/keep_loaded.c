/* keep_loaded.c — promote libmtc to RTLD_NODELETE before it starts threads. */
#include "base/keep_loaded.h"

#include <dlfcn.h>
#include <pthread.h>

#include "mtc.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void promote(void) {
  Dl_info self;
  /* Any function of ours names the file we were loaded from. */
  if (dladdr((void *)&mtc_version_number, &self) == 0 || self.dli_fname == NULL) return;
  /* RTLD_NOLOAD finds the copy already mapped (no second load) and
   * RTLD_NODELETE makes every later dlclose() leave it mapped. The handle
   * is kept open on purpose. In a static link this names the executable,
   * which is never unloaded anyway. */
  (void)dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void mtc_keep_loaded(void) { pthread_once(&once, promote); }
