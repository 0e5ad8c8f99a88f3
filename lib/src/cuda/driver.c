/* driver.c — opens the CUDA driver with dlopen, once, and resolves the
 * entry points libmtc uses. MTC_CUDA_DRIVER names another library to open
 * instead (the tests point it at an emulated driver); the value "emulated"
 * names the emulated driver shipped next to libmtc. */
#include "cuda/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "cuda/fault.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static mtc_cuda_api api;
static mtc_status load_status = MTC_ERR_INTERNAL;
static char loaded_path[4096]; /* the driver's file, as dlopen was given it */
/* The load's failure message, replayed to every thread that asks later. */
static char load_message[MTC_ERROR_CAPACITY];

typedef struct symbol_entry {
  const char *name;
  size_t offset; /* of the function pointer in mtc_cuda_api */
  int optional;
} symbol_entry;

#define REQUIRED(name) {#name, offsetof(mtc_cuda_api, name), 0}
#define OPTIONAL(name) {#name, offsetof(mtc_cuda_api, name), 1}

static const symbol_entry symbols[] = {
    REQUIRED(cuInit),
    REQUIRED(cuDriverGetVersion),
    REQUIRED(cuGetErrorName),
    REQUIRED(cuGetErrorString),
    REQUIRED(cuDeviceGetCount),
    REQUIRED(cuDeviceGet),
    REQUIRED(cuDevicePrimaryCtxRetain),
    REQUIRED(cuDevicePrimaryCtxRelease_v2),
    REQUIRED(cuCtxGetCurrent),
    REQUIRED(cuCtxSetCurrent),
    REQUIRED(cuCtxPushCurrent_v2),
    REQUIRED(cuCtxPopCurrent_v2),
    REQUIRED(cuCtxGetDevice),
    REQUIRED(cuStreamCreate),
    REQUIRED(cuStreamDestroy_v2),
    REQUIRED(cuStreamSynchronize),
    REQUIRED(cuStreamWaitEvent),
    REQUIRED(cuEventCreate),
    REQUIRED(cuEventDestroy_v2),
    REQUIRED(cuEventRecord),
    REQUIRED(cuEventQuery),
    REQUIRED(cuEventSynchronize),
    OPTIONAL(cuEventElapsedTime),
    OPTIONAL(cuDeviceGetName),
    OPTIONAL(cuDeviceTotalMem_v2),
    REQUIRED(cuMemHostAlloc),
    REQUIRED(cuMemFreeHost),
    REQUIRED(cuMemAlloc_v2),
    REQUIRED(cuMemFree_v2),
    OPTIONAL(cuMemPoolCreate),
    OPTIONAL(cuMemPoolDestroy),
    OPTIONAL(cuMemPoolSetAttribute),
    OPTIONAL(cuMemAllocFromPoolAsync),
    OPTIONAL(cuMemFreeAsync),
    OPTIONAL(cuMemPoolSetAccess),
    REQUIRED(cuMemcpyHtoDAsync_v2),
    REQUIRED(cuMemcpyDtoHAsync_v2),
    REQUIRED(cuMemcpyDtoDAsync_v2),
    REQUIRED(cuMemcpyPeerAsync),
    REQUIRED(cuDeviceCanAccessPeer),
    REQUIRED(cuCtxEnablePeerAccess),
    OPTIONAL(cuModuleLoadData),
    OPTIONAL(cuModuleGetFunction),
    OPTIONAL(cuModuleUnload),
    OPTIONAL(cuLaunchKernel),
    OPTIONAL(cuMemsetD8Async),
    OPTIONAL(cuModuleLoadDataEx),
};

/* The files MTC_CUDA_DRIVER=emulated looks for in libmtc's own folder: the
 * npm package's (prebuilt/<platform>/), then a build's (zig-out/lib/). */
static const char *const emulated_names[] = {"libcuda-emulated.so", "libfakecuda.so"};

/* Writes dir (its first dir_len bytes) + an emulated driver's name into buf
 * and returns 0 for the first such file that exists; -1 when none does. */
static int emulated_in(char *buf, size_t size, const char *dir, int dir_len) {
  for (size_t i = 0; i < sizeof emulated_names / sizeof emulated_names[0]; i++) {
    int n = snprintf(buf, size, "%.*s%s", dir_len, dir, emulated_names[i]);
    if (n > 0 && (size_t)n < size && access(buf, R_OK) == 0) return 0;
  }
  return -1;
}

/* MTC_CUDA_DRIVER=emulated: writes the path of the emulated driver beside
 * the file libmtc was loaded from, else beside the running program, into
 * buf (size bytes) and returns 0; -1 with load_message set when there is
 * none. The program's folder serves a single-file executable, whose libmtc
 * is a temporary copy of the one it embeds. */
static int emulated_driver_path(char *buf, size_t size) {
  Dl_info self;
  if (dladdr((const void *)&api, &self) == 0 || self.dli_fname == NULL) {
    mtc_format(load_message, sizeof load_message,
               "MTC_CUDA_DRIVER=emulated: cannot tell which file libmtc was loaded from");
    return -1;
  }
  const char *slash = strrchr(self.dli_fname, '/');
  int dir = slash ? (int)(slash - self.dli_fname + 1) : 0;
  if (emulated_in(buf, size, dir ? self.dli_fname : "./", dir ? dir : 2) == 0) return 0;
  char program[4096];
  ssize_t length = readlink("/proc/self/exe", program, sizeof program - 1);
  const char *program_slash = NULL;
  if (length > 0) {
    program[length] = '\0';
    program_slash = strrchr(program, '/');
  }
  int program_dir = program_slash ? (int)(program_slash - program + 1) : 0;
  if (program_dir > 0 && emulated_in(buf, size, program, program_dir) == 0) return 0;
  mtc_format(load_message, sizeof load_message,
             "MTC_CUDA_DRIVER=emulated: no emulated driver (%s or %s) next to libmtc in %.*s "
             "or next to the program in %.*s; put libcuda-emulated.so (the npm package's "
             "prebuilt/<platform>/libcuda-emulated.so) in one of those folders, or set "
             "MTC_CUDA_DRIVER to its path",
             emulated_names[0], emulated_names[1], dir ? dir : 2, dir ? self.dli_fname : "./",
             program_dir ? program_dir : 1, program_dir ? program : "?");
  return -1;
}

static void load_driver(void) {
  /* A malformed MTC_FAULT (fault.h) fails the load instead of being
   * ignored: a test that meant to inject faults must not pass without. */
  if (mtc_fault_configure(load_message, sizeof load_message) != MTC_OK) {
    load_status = MTC_ERR_INVALID_ARGUMENT;
    return;
  }
  const char *override = getenv("MTC_CUDA_DRIVER");
  const char *path =
      (override != NULL && override[0] != '\0') ? override : "libcuda.so.1";
  static char emulated[4096];
  if (strcmp(path, "emulated") == 0) {
    if (emulated_driver_path(emulated, sizeof emulated) != 0) {
      load_status = MTC_ERR_NO_DRIVER;
      return;
    }
    path = emulated;
  }

  /* RTLD_LOCAL: the driver's symbols must not leak into the process's
   * global namespace (the host runtime may load its own copy). */
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *why = dlerror();
    mtc_format(load_message, sizeof load_message,
               "could not load the CUDA driver %s: %s", path,
               why ? why : "unknown dlopen error");
    load_status = MTC_ERR_NO_DRIVER;
    return;
  }

  mtc_cuda_api table;
  memset(&table, 0, sizeof table);
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    void *fn = dlsym(handle, symbols[i].name);
    if (fn == NULL && !symbols[i].optional) {
      mtc_format(load_message, sizeof load_message,
                 "%s lacks %s: %s", path, symbols[i].name,
                 strcmp(symbols[i].name, "cuInit") == 0
                     ? "it is no CUDA driver (point MTC_CUDA_DRIVER at libcuda.so.1, or at the emulated driver)"
                     : "the CUDA driver is too old for libmtc");
      load_status = MTC_ERR_NO_DRIVER;
      dlclose(handle);
      return;
    }
    /* Function pointers and void * share a representation on every
     * platform with dlsym; memcpy avoids the ISO C cast warning. */
    memcpy((char *)&table + symbols[i].offset, &fn, sizeof fn);
  }

  CUresult result = table.cuInit(0);
  if (result != CUDA_SUCCESS) {
    const char *name = NULL;
    if (table.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == NULL) {
      name = "unknown CUDA error";
    }
    mtc_format(load_message, sizeof load_message,
               "the CUDA driver %s failed to initialise: cuInit returned %s "
               "(%d)",
               path, name, result);
    load_status = MTC_ERR_NO_DRIVER;
    /* Keep the library loaded: unloading a driver after cuInit is unsafe. */
    return;
  }

  /* A missing piece of the stream-ordered allocator disables all of it. */
  if (!table.cuMemPoolCreate || !table.cuMemPoolDestroy ||
      !table.cuMemPoolSetAttribute || !table.cuMemAllocFromPoolAsync ||
      !table.cuMemFreeAsync || !table.cuMemPoolSetAccess) {
    table.cuMemPoolCreate = NULL;
    table.cuMemPoolDestroy = NULL;
    table.cuMemPoolSetAttribute = NULL;
    table.cuMemAllocFromPoolAsync = NULL;
    table.cuMemFreeAsync = NULL;
    table.cuMemPoolSetAccess = NULL;
  }

  /* Likewise for modules and launches: all or none. */
  if (!table.cuModuleLoadData || !table.cuModuleGetFunction ||
      !table.cuModuleUnload || !table.cuLaunchKernel) {
    table.cuModuleLoadData = NULL;
    table.cuModuleGetFunction = NULL;
    table.cuModuleUnload = NULL;
    table.cuLaunchKernel = NULL;
    table.cuModuleLoadDataEx = NULL;
  }

  /* The file the loader resolved a bare name to, where it says. */
  Dl_info where;
  void *init;
  memcpy(&init, &table.cuInit, sizeof init);
  const char *file = dladdr(init, &where) != 0 && where.dli_fname ? where.dli_fname : path;
  snprintf(loaded_path, sizeof loaded_path, "%s", file);
  mtc_fault_install(&table);
  api = table;
  load_status = MTC_OK;
}

const char *mtc_cuda_driver_path(void) {
  pthread_once(&load_once, load_driver);
  return load_status == MTC_OK ? loaded_path : NULL;
}

mtc_status mtc_cuda_load(const mtc_cuda_api **out) {
  pthread_once(&load_once, load_driver);
  if (load_status != MTC_OK) {
    if (out) *out = NULL;
    return mtc_error_set_text(load_status, load_message);
  }
  if (out) *out = &api;
  return MTC_OK;
}

mtc_status mtc_cuda_device_count_internal(int *out_count) {
  const mtc_cuda_api *cu;
  *out_count = 0;
  mtc_status status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  int count = 0;
  CUresult result = cu->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) return mtc_cuda_fail(result, "cuDeviceGetCount");
  *out_count = count;
  return MTC_OK;
}

const char *mtc_cuda_error_name(CUresult result) {
  const char *name = NULL;
  if (load_status == MTC_OK && api.cuGetErrorName(result, &name) == CUDA_SUCCESS &&
      name != NULL) {
    return name;
  }
  return "CUDA_ERROR_UNKNOWN_CODE";
}

mtc_status mtc_cuda_fail(CUresult result, const char *what) {
  const char *text = NULL;
  if (load_status != MTC_OK ||
      api.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == NULL) {
    text = "no description";
  }
  mtc_status status =
      result == CUDA_ERROR_OUT_OF_MEMORY ? MTC_ERR_OUT_OF_MEMORY : MTC_ERR_CUDA;
  return mtc_error_set(status, "%s failed: %s (%d: %s)", what,
                       mtc_cuda_error_name(result), result, text);
}
