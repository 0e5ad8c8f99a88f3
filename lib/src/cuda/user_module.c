/* user_module.c — the mtc_module calls of mtc.h: load a module of the
 * caller's kernels from PTX, cubin or fatbin bytes, look a kernel up by
 * name, unload. */
#include "cuda/user_module.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* The driver's module calls, or MTC_ERR_UNSUPPORTED naming `call`. */
static mtc_status module_api(const char *call, const mtc_cuda_api **cu) {
  mtc_status status = mtc_cuda_load(cu);
  if (status != MTC_OK) return status;
  if ((*cu)->cuModuleLoadData == NULL) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "%s: the CUDA driver lacks cuModuleLoadData, "
                         "cuModuleGetFunction, cuModuleUnload or "
                         "cuLaunchKernel (driver too old?)",
                         call);
  }
  return MTC_OK;
}

/* Bytes of the JIT compiler's error log kept for the message. */
#define JIT_LOG_BYTES 2048

/* cuModuleLoadDataEx with the JIT error log where the driver has it: a PTX
 * error then says what the compiler found, not only that it failed. */
static CUresult load_image(const mtc_cuda_api *cu, CUmodule *module,
                           const char *image, char *log) {
  log[0] = '\0';
  if (cu->cuModuleLoadDataEx == NULL) return cu->cuModuleLoadData(module, image);
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, (void *)(uintptr_t)JIT_LOG_BYTES};
  CUresult r = cu->cuModuleLoadDataEx(module, image, 2, options, values);
  log[JIT_LOG_BYTES - 1] = '\0';
  return r;
}

/* Loads `image` (NUL-terminated) with the device's context current. */
static mtc_status load_in_context(const mtc_cuda_api *cu, mtc_device *d,
                                  const char *image, mtc_module **out) {
  mtc_module *m = calloc(1, sizeof *m);
  if (m == NULL) return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  mtc_status status = mtc_context_scope_use(&scope, d);
  char log[JIT_LOG_BYTES];
  if (status == MTC_OK) {
    CUresult r = load_image(cu, &m->module, image, log);
    if (r != CUDA_SUCCESS) {
      char what[96];
      mtc_format(what, sizeof what, "mtc_module_load: loading the image on cuda:%d: %s",
                 d->ordinal,
                 cu->cuModuleLoadDataEx ? "cuModuleLoadDataEx" : "cuModuleLoadData");
      status = mtc_cuda_fail(r, what);
      if (log[0] != '\0') {
        char why[MTC_ERROR_CAPACITY];
        mtc_format(why, sizeof why, "%s", mtc_error_text());
        mtc_error_set(status, "%s; the JIT compiler says: %s", why, log);
      }
    }
  }
  mtc_context_scope_end(&scope);
  if (status != MTC_OK) {
    free(m);
    return status;
  }
  m->device = d;
  *out = m;
  return MTC_OK;
}

MTC_API mtc_status mtc_module_load(int32_t device, const void *image,
                                   uint64_t bytes, mtc_module **out_module) {
  static const char call[] = "mtc_module_load";
  if (out_module == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: out_module must not be NULL", call);
  }
  *out_module = NULL;
  if (image == NULL || bytes == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: the image is empty (pass PTX text or cubin / "
                         "fatbin bytes)",
                         call);
  }
  if (device < 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: device %d is not a CUDA device ordinal", call,
                         device);
  }
  const mtc_cuda_api *cu;
  mtc_status status = module_api(call, &cu);
  if (status != MTC_OK) return status;
  mtc_device *d;
  status = mtc_device_get(device, &d);
  if (status != MTC_OK) return status;
  /* cuModuleLoadData takes no length: PTX must end in a NUL, and the
   * binary formats carry their own sizes, so a copy with one appended
   * serves both. */
  if (bytes > SIZE_MAX - 1) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "%s: image too large", call);
  }
  char *copy = malloc((size_t)bytes + 1);
  if (copy == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                         "%s: out of host memory (%llu bytes)", call,
                         (unsigned long long)bytes);
  }
  memcpy(copy, image, (size_t)bytes);
  copy[bytes] = '\0';
  status = load_in_context(cu, d, copy, out_module);
  free(copy);
  return status;
}

MTC_API void mtc_module_unload(mtc_module *module) {
  if (module == NULL) return;
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) == MTC_OK && cu->cuModuleUnload != NULL) {
    mtc_context_scope scope;
    mtc_context_scope_begin(&scope);
    if (mtc_context_scope_use(&scope, module->device) == MTC_OK) {
      CUresult r = cu->cuModuleUnload(module->module);
      /* Nothing to return; the message is there for whoever looks. */
      if (r != CUDA_SUCCESS) mtc_cuda_fail(r, "mtc_module_unload: cuModuleUnload");
    }
    mtc_context_scope_end(&scope);
  }
  free(module);
}

MTC_API mtc_status mtc_module_get_function(mtc_module *module,
                                           const char *name,
                                           uint64_t *out_function) {
  static const char call[] = "mtc_module_get_function";
  if (module == NULL || name == NULL || out_function == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: module, name and out_function must not be NULL",
                         call);
  }
  *out_function = 0;
  const mtc_cuda_api *cu;
  mtc_status status = module_api(call, &cu);
  if (status != MTC_OK) return status;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, module->device);
  if (status == MTC_OK) {
    CUfunction function = NULL;
    CUresult r = cu->cuModuleGetFunction(&function, module->module, name);
    if (r == CUDA_SUCCESS) {
      *out_function = (uint64_t)(uintptr_t)function;
    } else {
      char what[160];
      mtc_format(what, sizeof what, "%s: kernel \"%.80s\": cuModuleGetFunction",
                 call, name);
      status = mtc_cuda_fail(r, what);
    }
  }
  mtc_context_scope_end(&scope);
  return status;
}
