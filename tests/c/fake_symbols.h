/* fake_symbols.h — how the C tests reach the emulated driver's test-only
 * exports (fake_cuda_*), next to libmtc's own use of the same library. */
#ifndef MTC_TEST_FAKE_SYMBOLS_H
#define MTC_TEST_FAKE_SYMBOLS_H

#include <dlfcn.h>
#include <string.h>

#include "check.h"

/* Opens the emulated driver with the same path and flags as libmtc's
 * dlopen, so both see one shared instance. NULL (and a failed check) when
 * it cannot be opened. */
static inline void *fake_open(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(handle != NULL);
  return handle;
}

/* Stores symbol `name` of `handle` in the function pointer `field`, through
 * memcpy: ISO C has no cast from object to function pointers. */
#define FAKE_SYM(handle, field, name)          \
  do {                                         \
    void *fake_sym_ = dlsym((handle), (name)); \
    memcpy(&(field), &fake_sym_, sizeof fake_sym_); \
  } while (0)

#endif
