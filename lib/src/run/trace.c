/* trace.c — MTC_TRACE=1: each copy's timeline on stderr (see trace.h). */
#include "run/trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/env.h"
#include "base/spin.h"
#include "cuda/driver.h"

typedef struct span {
  const char *what;
  const char *subject;
  int64_t index;
  uint64_t bytes;
  uint64_t begin_ns, end_ns;
  mtc_device *device; /* DMAs: the device whose event `done` follows it */
  CUevent done;
  uint64_t done_ns;
  char *note; /* a note's text (malloc'd), or NULL for a span */
} span;

struct mtc_trace {
  uint64_t origin_ns;
  span *spans;
  size_t count, capacity;
  size_t pending; /* first span whose DMA completion is not yet seen */
};

static pthread_once_t read_once = PTHREAD_ONCE_INIT;
static int enabled;

static void read_setting(void) {
  enabled = mtc_env_flag("MTC_TRACE") == 1; /* "off", "false", "2": off */
}

mtc_trace *mtc_trace_open(uint64_t origin_ns) {
  pthread_once(&read_once, read_setting);
  if (!enabled) return NULL;
  mtc_trace *trace = calloc(1, sizeof *trace);
  if (trace != NULL) trace->origin_ns = origin_ns;
  return trace;
}

/* Stamps the DMAs that completed since the last look. The copies on one
 * stream complete in order, so this stops at the first one still running;
 * with `wait`, it waits for every one. A completion is seen at the next
 * look, so its time is an upper bound, as close as the spans are dense. */
static void look(mtc_trace *trace, int wait) {
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK) return;
  for (; trace->pending < trace->count; trace->pending++) {
    span *s = &trace->spans[trace->pending];
    if (s->done == NULL) continue;
    CUresult r;
    while ((r = cu->cuEventQuery(s->done)) == CUDA_ERROR_NOT_READY && wait) {
      mtc_cpu_relax();
    }
    if (r == CUDA_ERROR_NOT_READY) return;
    s->done_ns = mtc_clock_ns();
    mtc_device_event_release(s->device, s->done);
    s->done = NULL;
  }
}

static span *add(mtc_trace *trace) {
  if (trace->count == trace->capacity) {
    size_t grown = trace->capacity ? trace->capacity * 2 : 64;
    span *more = realloc(trace->spans, grown * sizeof *more);
    if (more == NULL) return NULL;
    trace->spans = more;
    trace->capacity = grown;
  }
  span *s = &trace->spans[trace->count++];
  memset(s, 0, sizeof *s);
  return s;
}

void mtc_trace_span(mtc_trace *trace, const char *what, const char *subject,
                    int64_t index, uint64_t bytes, uint64_t begin_ns) {
  if (trace == NULL) return;
  uint64_t now = mtc_clock_ns();
  look(trace, 0);
  span *s = add(trace);
  if (s == NULL) return;
  s->what = what;
  s->subject = subject;
  s->index = index;
  s->bytes = bytes;
  s->begin_ns = begin_ns;
  s->end_ns = now;
}

void mtc_trace_dma(mtc_trace *trace, mtc_device *device, const char *subject,
                   int64_t index, uint64_t bytes, uint64_t begin_ns) {
  if (trace == NULL) return;
  mtc_trace_span(trace, "issue", subject, index, bytes, begin_ns);
  const mtc_cuda_api *cu;
  if (trace->count == 0 || mtc_cuda_load(&cu) != MTC_OK) return;
  span *s = &trace->spans[trace->count - 1];
  if (mtc_device_event_acquire(device, &s->done) != MTC_OK) return;
  if (cu->cuEventRecord(s->done, device->stream) != CUDA_SUCCESS) {
    mtc_device_event_release(device, s->done);
    s->done = NULL;
    return;
  }
  s->device = device;
}

void mtc_trace_note(mtc_trace *trace, const char *format, ...) {
  if (trace == NULL) return;
  char text[256];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  uint64_t now = mtc_clock_ns();
  span *s = add(trace);
  if (s == NULL) return;
  s->what = "note";
  s->subject = "";
  s->begin_ns = s->end_ns = now;
  s->note = strdup(text);
}

static double us(const mtc_trace *trace, uint64_t ns) {
  return ns < trace->origin_ns ? 0.0 : (double)(ns - trace->origin_ns) / 1e3;
}

void mtc_trace_close(mtc_trace *trace, const char *outcome) {
  if (trace == NULL) return;
  look(trace, 1);
  fprintf(stderr, "mtc trace: copy of %zu spans, %s (µs from submit)\n",
          trace->count, outcome);
  for (size_t i = 0; i < trace->count; i++) {
    const span *s = &trace->spans[i];
    if (s->note != NULL) {
      fprintf(stderr, "mtc trace: %9.1f               note  %s\n",
              us(trace, s->begin_ns), s->note);
      free(s->note);
      continue;
    }
    char done[48] = "";
    if (s->done_ns != 0) {
      snprintf(done, sizeof done, "  done %9.1f", us(trace, s->done_ns));
    }
    fprintf(stderr, "mtc trace: %9.1f .. %9.1f  %-5s %-6s %6lld %11llu B%s\n",
            us(trace, s->begin_ns), us(trace, s->end_ns), s->what, s->subject,
            (long long)s->index, (unsigned long long)s->bytes, done);
  }
  free(trace->spans);
  free(trace);
}
