/* fault.c — MTC_FAULT: parses the rules once, at driver load, and wraps the
 * driver entries of the classes they name. A wrapper counts its class's
 * calls atomically and either fails the call (nothing reaches the driver)
 * or forwards it. Event waits are the exception: the real wait runs first
 * and only a wait that saw the work complete is counted and may fail, so an
 * injected failure never leaves a copy in flight behind the library's back
 * (and polling, whose count of "not ready" answers varies, counts nothing). */
#include "cuda/fault.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef enum fault_class {
  FAULT_PINNED_ALLOC,
  FAULT_DEVICE_ALLOC,
  FAULT_COPY_SUBMIT,
  FAULT_EVENT_QUERY,
  FAULT_CLASS_COUNT
} fault_class;

/* Each class with the CUresult its calls fail with unless a rule says. */
static const struct {
  const char *name;
  CUresult code;
} classes[FAULT_CLASS_COUNT] = {
    {"pinned-alloc", 2},  /* CUDA_ERROR_OUT_OF_MEMORY */
    {"device-alloc", 2},  /* CUDA_ERROR_OUT_OF_MEMORY */
    {"copy-submit", 700}, /* CUDA_ERROR_ILLEGAL_ADDRESS, a sticky error */
    {"event-query", 719}, /* CUDA_ERROR_LAUNCH_FAILED */
};

/* CUresults a rule may name, with the driver's own names and descriptions:
 * a driver that does not know one (the emulated driver) still gets a clear
 * message. */
static const struct {
  CUresult code;
  const char *name;
  const char *text;
} known_results[] = {
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
#define KNOWN_RESULT_COUNT (sizeof known_results / sizeof known_results[0])

/* Calls first..last (counted from 1) of cls fail with code. */
typedef struct fault_rule {
  fault_class cls;
  uint64_t first, last;
  CUresult code;
} fault_rule;

#define MAX_RULES 16
#define MAX_SPEC 400

/* Written once under the driver's pthread_once, read-only afterwards. */
static fault_rule rules[MAX_RULES];
static size_t rule_count;
static int armed[FAULT_CLASS_COUNT];
static mtc_cuda_api real;

static atomic_uint_fast64_t calls[FAULT_CLASS_COUNT];

/* The failure this thread injected last, until its message is built. */
static _Thread_local struct {
  int set;
  CUresult code;
  fault_class cls;
  uint64_t call;
} injected;
static _Thread_local char injected_text[192];

/* ------------------------------------------------------------- parsing */

static const char *const syntax =
    "entries are CLASS:N, CLASS:N-M or CLASS:N+ (calls counted from 1), "
    "optionally followed by =CUresult, separated by commas; classes: "
    "pinned-alloc, device-alloc, copy-submit, event-query";

typedef struct parser {
  const char *spec;
  char *message;
  size_t capacity;
} parser;

static mtc_status parse_error(const parser *p, const char *entry,
                              size_t entry_length, const char *why) {
  mtc_format(p->message, p->capacity, "MTC_FAULT=\"%s\": entry \"%.*s\" %s (%s)",
             p->spec, (int)entry_length, entry, why, syntax);
  return MTC_ERR_INVALID_ARGUMENT;
}

/* A decimal number, all of [s, end). */
static int parse_number(const char *s, const char *end, uint64_t *out) {
  if (s == end) return -1;
  uint64_t value = 0;
  for (; s < end; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned digit = (unsigned)(*s - '0');
    if (value > (UINT64_MAX - digit) / 10) return -1;
    value = value * 10 + digit;
  }
  *out = value;
  return 0;
}

/* A call number: 1 or more. */
static int parse_count(const char *s, const char *end, uint64_t *out) {
  return parse_number(s, end, out) != 0 || *out == 0 ? -1 : 0;
}

/* A CUresult by number or by name, with or without CUDA_ERROR_. */
static int parse_code(const char *s, const char *end, CUresult *out) {
  uint64_t number;
  if (parse_number(s, end, &number) == 0) {
    if (number > 0x7fffffff) return -1;
    *out = (CUresult)number;
    return 0;
  }
  size_t length = (size_t)(end - s);
  for (size_t i = 0; i < KNOWN_RESULT_COUNT; i++) {
    const char *name = known_results[i].name;
    const char *bare = name + strlen("CUDA_ERROR_");
    if ((strlen(name) == length && memcmp(name, s, length) == 0) ||
        (strlen(bare) == length && memcmp(bare, s, length) == 0)) {
      *out = known_results[i].code;
      return 0;
    }
  }
  return -1;
}

static mtc_status parse_entry(const parser *p, const char *entry,
                              const char *end) {
  size_t length = (size_t)(end - entry);
  if (length == 0) return parse_error(p, entry, 0, "is empty");
  if (rule_count == MAX_RULES) {
    return parse_error(p, entry, length, "is one too many (16 at most)");
  }
  const char *colon = memchr(entry, ':', length);
  if (colon == NULL) {
    return parse_error(p, entry, length,
                       "lacks \":N\", the call of its class that fails");
  }
  fault_rule rule = {FAULT_PINNED_ALLOC, 0, 0, 0};
  size_t name_length = (size_t)(colon - entry);
  int found = 0;
  for (int c = 0; c < FAULT_CLASS_COUNT; c++) {
    if (strlen(classes[c].name) == name_length &&
        memcmp(classes[c].name, entry, name_length) == 0) {
      rule.cls = (fault_class)c;
      found = 1;
    }
  }
  if (!found) return parse_error(p, entry, length, "names no class");

  const char *counts = colon + 1;
  const char *equals = memchr(counts, '=', (size_t)(end - counts));
  const char *counts_end = equals ? equals : end;
  rule.code = classes[rule.cls].code;
  if (equals != NULL) {
    if (parse_code(equals + 1, end, &rule.code) != 0) {
      return parse_error(p, entry, length,
                         "names no CUresult after \"=\" (a number, or one of "
                         "OUT_OF_MEMORY, INVALID_VALUE, NOT_INITIALIZED, "
                         "ECC_UNCORRECTABLE, INVALID_HANDLE, ILLEGAL_ADDRESS, "
                         "LAUNCH_FAILED, UNKNOWN)");
    }
    if (rule.code == CUDA_SUCCESS || rule.code == CUDA_ERROR_NOT_READY) {
      return parse_error(p, entry, length,
                         "names a CUresult that is no failure");
    }
  }
  const char *dash = memchr(counts, '-', (size_t)(counts_end - counts));
  int bad;
  if (counts_end > counts && counts_end[-1] == '+') {
    bad = parse_count(counts, counts_end - 1, &rule.first);
    rule.last = UINT64_MAX;
  } else if (dash != NULL) {
    bad = parse_count(counts, dash, &rule.first) ||
          parse_count(dash + 1, counts_end, &rule.last);
    if (!bad && rule.last < rule.first) {
      return parse_error(p, entry, length, "ends its range before it starts");
    }
  } else {
    bad = parse_count(counts, counts_end, &rule.first);
    rule.last = rule.first;
  }
  if (bad) {
    return parse_error(p, entry, length,
                       "has no call number of 1 or more after \":\"");
  }
  rules[rule_count++] = rule;
  armed[rule.cls] = 1;
  return MTC_OK;
}

mtc_status mtc_fault_configure(char *message, size_t capacity) {
  const char *spec = getenv("MTC_FAULT");
  if (spec == NULL || spec[0] == '\0') return MTC_OK;
  parser p = {spec, message, capacity};
  if (strlen(spec) > MAX_SPEC) {
    mtc_format(message, capacity,
               "MTC_FAULT is %zu characters long; the limit is %d",
               strlen(spec), MAX_SPEC);
    return MTC_ERR_INVALID_ARGUMENT;
  }
  const char *entry = spec;
  for (;;) {
    const char *comma = strchr(entry, ',');
    const char *end = comma ? comma : entry + strlen(entry);
    mtc_status status = parse_entry(&p, entry, end);
    if (status != MTC_OK) {
      rule_count = 0;
      memset(armed, 0, sizeof armed);
      return status;
    }
    if (comma == NULL) break;
    entry = comma + 1;
  }
  return MTC_OK;
}

/* ------------------------------------------------------------ wrappers */

/* Counts a call of cls; nonzero (and *code) when this one must fail. */
static int inject(fault_class cls, CUresult *code) {
  uint64_t call = atomic_fetch_add(&calls[cls], 1) + 1;
  for (size_t i = 0; i < rule_count; i++) {
    if (rules[i].cls == cls && call >= rules[i].first && call <= rules[i].last) {
      injected.set = 1;
      injected.code = rules[i].code;
      injected.cls = cls;
      injected.call = call;
      *code = rules[i].code;
      return 1;
    }
  }
  injected.set = 0;
  return 0;
}

static CUresult wrap_cuMemHostAlloc(void **ptr, size_t bytes,
                                    unsigned int flags) {
  CUresult code;
  if (inject(FAULT_PINNED_ALLOC, &code)) return code;
  return real.cuMemHostAlloc(ptr, bytes, flags);
}

static CUresult wrap_cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  CUresult code;
  if (inject(FAULT_DEVICE_ALLOC, &code)) return code;
  return real.cuMemAlloc_v2(ptr, bytes);
}

static CUresult wrap_cuMemAllocFromPoolAsync(CUdeviceptr *ptr, size_t bytes,
                                             CUmemoryPool pool,
                                             CUstream stream) {
  CUresult code;
  if (inject(FAULT_DEVICE_ALLOC, &code)) return code;
  return real.cuMemAllocFromPoolAsync(ptr, bytes, pool, stream);
}

static CUresult wrap_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                          size_t bytes, CUstream stream) {
  CUresult code;
  if (inject(FAULT_COPY_SUBMIT, &code)) return code;
  return real.cuMemcpyHtoDAsync_v2(dst, src, bytes, stream);
}

static CUresult wrap_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src,
                                          size_t bytes, CUstream stream) {
  CUresult code;
  if (inject(FAULT_COPY_SUBMIT, &code)) return code;
  return real.cuMemcpyDtoHAsync_v2(dst, src, bytes, stream);
}

static CUresult wrap_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src,
                                          size_t bytes, CUstream stream) {
  CUresult code;
  if (inject(FAULT_COPY_SUBMIT, &code)) return code;
  return real.cuMemcpyDtoDAsync_v2(dst, src, bytes, stream);
}

static CUresult wrap_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx,
                                       CUdeviceptr src, CUcontext src_ctx,
                                       size_t bytes, CUstream stream) {
  CUresult code;
  if (inject(FAULT_COPY_SUBMIT, &code)) return code;
  return real.cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream);
}

static CUresult wrap_cuLaunchKernel(CUfunction function, unsigned int grid_x,
                                    unsigned int grid_y, unsigned int grid_z,
                                    unsigned int block_x, unsigned int block_y,
                                    unsigned int block_z,
                                    unsigned int shared_bytes, CUstream stream,
                                    void **params, void **extra) {
  CUresult code;
  if (inject(FAULT_COPY_SUBMIT, &code)) return code;
  return real.cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x,
                             block_y, block_z, shared_bytes, stream, params,
                             extra);
}

static CUresult wrap_cuEventQuery(CUevent event) {
  CUresult r = real.cuEventQuery(event);
  CUresult code;
  if (r == CUDA_SUCCESS && inject(FAULT_EVENT_QUERY, &code)) return code;
  return r;
}

static CUresult wrap_cuEventSynchronize(CUevent event) {
  CUresult r = real.cuEventSynchronize(event);
  CUresult code;
  if (r == CUDA_SUCCESS && inject(FAULT_EVENT_QUERY, &code)) return code;
  return r;
}

static int known_result(CUresult code) {
  for (size_t i = 0; i < KNOWN_RESULT_COUNT; i++) {
    if (known_results[i].code == code) return (int)i;
  }
  return -1;
}

static CUresult wrap_cuGetErrorName(CUresult error, const char **name) {
  CUresult r = real.cuGetErrorName(error, name);
  if (r == CUDA_SUCCESS && *name != NULL) return r;
  int i = known_result(error);
  if (i < 0) return r;
  *name = known_results[i].name;
  return CUDA_SUCCESS;
}

/* The driver's description; for a failure this thread just injected, with
 * a note that says so (mtc_cuda_fail reads it right after the call). */
static CUresult wrap_cuGetErrorString(CUresult error, const char **text) {
  const char *base = NULL;
  if (real.cuGetErrorString(error, &base) != CUDA_SUCCESS || base == NULL) {
    int i = known_result(error);
    base = i >= 0 ? known_results[i].text : "no description";
  }
  if (injected.set && injected.code == error) {
    injected.set = 0;
    mtc_format(injected_text, sizeof injected_text,
               "%s; injected by MTC_FAULT at %s call %llu", base,
               classes[injected.cls].name,
               (unsigned long long)injected.call);
    *text = injected_text;
  } else {
    *text = base;
  }
  return CUDA_SUCCESS;
}

void mtc_fault_install(mtc_cuda_api *table) {
  if (rule_count == 0) return;
  real = *table;
  table->cuGetErrorName = wrap_cuGetErrorName;
  table->cuGetErrorString = wrap_cuGetErrorString;
  if (armed[FAULT_PINNED_ALLOC]) table->cuMemHostAlloc = wrap_cuMemHostAlloc;
  if (armed[FAULT_DEVICE_ALLOC]) {
    table->cuMemAlloc_v2 = wrap_cuMemAlloc_v2;
    if (table->cuMemAllocFromPoolAsync != NULL) {
      table->cuMemAllocFromPoolAsync = wrap_cuMemAllocFromPoolAsync;
    }
  }
  if (armed[FAULT_COPY_SUBMIT]) {
    table->cuMemcpyHtoDAsync_v2 = wrap_cuMemcpyHtoDAsync_v2;
    table->cuMemcpyDtoHAsync_v2 = wrap_cuMemcpyDtoHAsync_v2;
    table->cuMemcpyDtoDAsync_v2 = wrap_cuMemcpyDtoDAsync_v2;
    table->cuMemcpyPeerAsync = wrap_cuMemcpyPeerAsync;
    if (table->cuLaunchKernel != NULL) {
      table->cuLaunchKernel = wrap_cuLaunchKernel;
    }
  }
  if (armed[FAULT_EVENT_QUERY]) {
    table->cuEventQuery = wrap_cuEventQuery;
    table->cuEventSynchronize = wrap_cuEventSynchronize;
  }
}
