/* fake_modules.c — the emulated driver's modules: the images
 * cuModuleLoadData accepts (a fatbin, a cubin, PTX text, the test builds'
 * stand-in), the kernels of libmtc's cuda/ known by name, and the .entry
 * kernels of PTX text with their parameters' sizes. */
#include "fake_cuda.h"

/* What cuModuleLoadData accepts: 1 fatbin / cubin / the test stand-in, 2 PTX
 * text, 0 anything else (CUDA_ERROR_INVALID_IMAGE). */
static int image_kind(const void *image) {
  /* Byte by byte, so that a short image is never read past its NUL. */
  const unsigned char *b = image;
  if (b[0] == 0x50 && b[1] == 0xED && b[2] == 0x55 && b[3] == 0xBA) return 1; /* fatbin */
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') return 1;    /* cubin */
  if (strncmp(image, "libmtc test stub", 16) == 0) return 1;
  const char *text = image;
  if (strstr(text, ".version") && strstr(text, ".target")) return 2;
  return 0;
}

/* Bytes of a PTX parameter type (.u32, .f64, .b8, ...), 0 when unknown. */
static uint32_t ptx_type_bytes(const char *t, size_t n) {
  if (n < 3 || t[0] != '.') return 0;
  const char *bits = t + 2;
  if (t[1] == 'b' && t[2] == 'f') bits = t + 3; /* .bf16 */
  else if (t[1] != 'u' && t[1] != 's' && t[1] != 'b' && t[1] != 'f') return 0;
  size_t digits = n - (size_t)(bits - t);
  if (digits == 1 && bits[0] == '8') return 1;
  if (digits == 2 && memcmp(bits, "16", 2) == 0) return 2;
  if (digits == 2 && memcmp(bits, "32", 2) == 0) return 4;
  if (digits == 2 && memcmp(bits, "64", 2) == 0) return 8;
  return 0;
}

/* Finds `.entry name(` in PTX text and reads its parameters' sizes into f.
 * CUDA_ERROR_NOT_FOUND when there is no such entry, INVALID_IMAGE for a
 * parameter list the emulation cannot read. */
static CUresult ptx_find_entry(const char *fn, const char *text, const char *name, struct fake_function *f) {
  size_t len = strlen(name);
  const char *p = text;
  while ((p = strstr(p, ".entry")) != NULL) {
    p += 6;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (strncmp(p, name, len) != 0) continue;
    const char *q = p + len;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    if (*q != '(') continue;
    const char *end = strchr(q, ')');
    if (!end) return report(CUDA_ERROR_INVALID_IMAGE, fn, "kernel \"%s\": no ')' after its parameters", name);
    f->param_count = 0;
    for (const char *r = q; (r = strstr(r, ".param")) != NULL && r < end;) {
      r += 6;
      uint32_t size = 0, count = 1;
      /* Tokens up to the name: .align N, the type, state space qualifiers. */
      for (;;) {
        while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r') r++;
        if (*r != '.') break;
        size_t n = strcspn(r, " \t\r\n,)[");
        if (n == 6 && strncmp(r, ".align", 6) == 0) {
          r += n;
          while (*r == ' ') r++;
          r += strspn(r, "0123456789");
          continue;
        }
        if (!size) size = ptx_type_bytes(r, n);
        r += n;
      }
      r += strcspn(r, ",)[");
      if (*r == '[') count = (uint32_t)strtoul(r + 1, NULL, 10);
      if (!size || !count || f->param_count >= FAKE_MAX_PARAMS)
        return report(CUDA_ERROR_INVALID_IMAGE, fn, "kernel \"%s\": parameter %d has a type the emulation cannot read",
                      name, f->param_count);
      f->param_sizes[f->param_count++] = size * count;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    f->kernel = strcmp(name, "add_one_f32") == 0     ? KERNEL_PTX_ADD_ONE_F32
                : strcmp(name, "scale_add_f32") == 0 ? KERNEL_PTX_SCALE_ADD_F32
                                                     : KERNEL_PTX_RECORD;
    return CUDA_SUCCESS;
  }
  return report(CUDA_ERROR_NOT_FOUND, fn, "no kernel named \"%s\" in the PTX module", name);
}

static const struct {
  int id;
  const char *name;
} k_kernels[] = {
    {KERNEL_COPY_SEGMENTS, "mtc_copy_segments"},
    {KERNEL_DEBUG_FILL, "mtc_debug_fill"},
    {KERNEL_DEBUG_COPY, "mtc_debug_copy"},
    {KERNEL_SCATTER_SEGMENTS, "mtc_scatter_segments"},
};

/* Lock held. Drops functions whose module is gone. */
void drop_orphan_functions(void) {
  for (uint32_t i = 0; i < g_slot_count; i++)
    if (g_slots[i].kind == KIND_FUNCTION &&
        !handle_get(KIND_MODULE, (void *)((struct fake_function *)g_slots[i].obj)->module, NULL))
      handle_drop(i);
}

/* The emulated GPUs compile PTX for sm_90 (an H100): a newer .target fails
 * the JIT with CUDA_ERROR_INVALID_PTX, and this line in its error log. */
#define FAKE_SM 90

/* 0, or the sm_ number of a PTX text's .target newer than FAKE_SM. */
static int ptx_target_too_new(const char *text) {
  const char *t = strstr(text, ".target");
  if (!t) return 0;
  t += 7;
  while (*t == ' ' || *t == '\t') t++;
  if (strncmp(t, "sm_", 3) != 0) return 0;
  int sm = atoi(t + 3);
  return sm > FAKE_SM ? sm : 0;
}

/* What the emulated JIT checks of a PTX text (with ptx_target_too_new):
 * the structure a real driver's JIT would also refuse without, not the
 * instructions. Past comments and white space. */
static const char *ptx_skip(const char *p) {
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (p[0] == '/' && p[1] == '/') {
      p += strcspn(p, "\n");
    } else if (p[0] == '/' && p[1] == '*') {
      const char *end = strstr(p + 2, "*/");
      p = end ? end + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* NULL for a PTX text whose structure the emulation accepts: .version N.M
 * first, .target next, at least one .entry, braces that balance. Else why
 * not, as the JIT's log would say. A body the real JIT would refuse for its
 * instructions (a typo, an undeclared register) still loads here. */
static const char *ptx_problem(const char *text) {
  const char *p = ptx_skip(text);
  if (strncmp(p, ".version", 8) != 0) return "a PTX module must begin with a .version directive";
  p += 8;
  while (*p == ' ' || *p == '\t') p++;
  size_t major = strspn(p, "0123456789");
  if (major == 0 || p[major] != '.' || p[major + 1] < '0' || p[major + 1] > '9')
    return ".version needs a version number (major.minor)";
  p = ptx_skip(p + strcspn(p, "\n"));
  if (strncmp(p, ".target", 7) != 0) return "the .version directive must be followed by a .target directive";
  if (!strstr(p, ".entry")) return "no .entry directive: the module has no kernel";
  long depth = 0;
  for (const char *c = p; *c; c++) {
    if (*c == '{') depth++;
    if (*c == '}' && --depth < 0) return "a '}' closes no '{'";
  }
  return depth ? "a '{' is never closed" : NULL;
}

/* cuModuleLoadData and cuModuleLoadDataEx; a JIT failure's message goes to
 * log (log_size bytes, NUL-terminated) when log is not NULL. */
static CUresult module_load(const char *fn, CUmodule *module, const void *image, char *log, size_t log_size) {
  CUresult r = need_init(fn);
  if (r) return r;
  if (!module || !image) return report(CUDA_ERROR_INVALID_VALUE, fn, "module or image is NULL");
  struct fake_ctx *c;
  lock();
  if ((r = need_ctx(fn, &c))) goto out;
  if (g_module_load_error) {
    r = report(g_module_load_error, fn, "failing as fake_cuda_fail_module_loads(%d) asked", g_module_load_error);
    goto out;
  }
  int kind = image_kind(image);
  if (!kind) {
    r = report(CUDA_ERROR_INVALID_IMAGE, fn, "the image is no fatbin, cubin (ELF) or PTX text");
    goto out;
  }
  int sm = kind == 2 ? ptx_target_too_new(image) : 0;
  if (sm) {
    if (log && log_size)
      snprintf(log, log_size, "ptxas application ptx input: fatal: .target sm_%d is newer than this GPU (sm_%d)", sm,
               FAKE_SM);
    r = report(CUDA_ERROR_INVALID_PTX, fn, "PTX for sm_%d, the emulated GPU is sm_%d", sm, FAKE_SM);
    goto out;
  }
  const char *problem = kind == 2 ? ptx_problem(image) : NULL;
  if (problem) {
    if (log && log_size) snprintf(log, log_size, "ptxas application ptx input: fatal: %s", problem);
    r = report(CUDA_ERROR_INVALID_PTX, fn, "%s", problem);
    goto out;
  }
  size_t text_bytes = kind == 2 ? strlen(image) + 1 : 1;
  struct fake_module *m = calloc(1, sizeof *m + text_bytes);
  if (m && kind == 2) {
    memcpy(m->text, image, text_bytes);
    m->ptx = 1;
  }
  uintptr_t h = m ? handle_new(KIND_MODULE, m) : 0;
  if (!h) {
    free(m);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another module");
    goto out;
  }
  m->device = c->device;
  m->epoch = c->epoch;
  *module = (CUmodule)h;
out:
  unlock();
  return r;
}

FAKE_MODULE_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return module_load(__func__, module, image, NULL, 0);
}

/* Reads CU_JIT_ERROR_LOG_BUFFER and its size (written back as the bytes
 * used, as the real driver does); other options are accepted and ignored. */
FAKE_MODULE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                            CUjit_option *options, void **optionValues) {
  if (numOptions && (!options || !optionValues))
    return report(CUDA_ERROR_INVALID_VALUE, __func__, "%u options but options or optionValues is NULL", numOptions);
  char *log = NULL;
  size_t log_size = 0;
  int size_at = -1;
  for (unsigned i = 0; i < numOptions; i++) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) log = optionValues[i];
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      log_size = (size_t)(uintptr_t)optionValues[i];
      size_at = (int)i;
    }
  }
  if (log && log_size) log[0] = '\0';
  CUresult r = module_load(__func__, module, image, log, log_size);
  if (size_at >= 0 && log && log_size) optionValues[size_at] = (void *)(uintptr_t)strlen(log);
  return r;
}

FAKE_MODULE_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  CUresult r = need_init(__func__);
  if (r) return r;
  if (!hfunc || !name) return report(CUDA_ERROR_INVALID_VALUE, __func__, "hfunc or name is NULL");
  lock();
  struct fake_module *mod = handle_get(KIND_MODULE, hmod, NULL);
  if (!mod) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "module %p is not a live module (unloaded or never loaded)",
               (void *)hmod);
    goto out;
  }
  struct fake_function found = {0};
  if (mod->ptx) {
    if ((r = ptx_find_entry(__func__, mod->text, name, &found))) goto out;
  } else {
    for (size_t i = 0; i < sizeof k_kernels / sizeof k_kernels[0]; i++)
      if (strcmp(k_kernels[i].name, name) == 0) found.kernel = k_kernels[i].id;
  }
  if (!found.kernel) {
    r = report(CUDA_ERROR_NOT_FOUND, __func__, "no kernel named \"%s\"", name);
    goto out;
  }
  struct fake_function *f = calloc(1, sizeof *f);
  if (f) *f = found;
  uintptr_t h = f ? handle_new(KIND_FUNCTION, f) : 0;
  if (!h) {
    free(f);
    r = report(CUDA_ERROR_OUT_OF_MEMORY, __func__, "no room for another function");
    goto out;
  }
  f->module = (uintptr_t)hmod;
  *hfunc = (CUfunction)h;
out:
  unlock();
  return r;
}

FAKE_MODULE_API CUresult cuModuleUnload(CUmodule hmod) {
  CUresult r = need_init(__func__);
  if (r) return r;
  uint32_t slot;
  lock();
  if (!handle_get(KIND_MODULE, hmod, &slot)) {
    r = report(CUDA_ERROR_INVALID_HANDLE, __func__, "module %p is not a live module (unloaded or never loaded)",
               (void *)hmod);
  } else {
    handle_drop(slot);
    drop_orphan_functions();
  }
  unlock();
  return r;
}
