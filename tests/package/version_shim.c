/* version_shim.c — a stand-in for libmtc that exports only its version
 * functions and reports VERSION_NUMBER (MAJOR * 10000 + MINOR * 100 +
 * PATCH). The package test loads it through MTC_LIBRARY_PATH to check that
 * the bindings refuse a library of another version, by name, before they
 * look for any other function. */
#include <stdint.h>

#ifndef VERSION_NUMBER
#error "build with -DVERSION_NUMBER=<MAJOR*10000+MINOR*100+PATCH> -DVERSION_STRING=\"x.y.z\""
#endif

__attribute__((visibility("default"))) uint32_t mtc_version_number(void) { return VERSION_NUMBER; }

__attribute__((visibility("default"))) const char *mtc_version_string(void) { return VERSION_STRING; }
