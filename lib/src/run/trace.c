/* trace.c — MTC_TRACE=1 and MTC_TRACE_FILE: each copy's timeline, on stderr
 * and in the Trace Event Format file (see trace.h, trace_file.h). */
#include "run/trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/env.h"
#include "cuda/driver.h"
#include "run/trace_file.h"

typedef struct span {
  const char *what;
  const char *subject;
  int64_t index;
  uint64_t leaves, bytes;
  uint64_t begin_ns, end_ns;
  mtc_device *device; /* DMAs and launches: the device whose stream ran it */
  CUevent done;       /* a timing event recorded right after it */
  uint64_t done_ns;   /* when a poll first saw `done` complete */
  uint64_t gpu_end_ns; /* its completion on the GPU, on the host clock; 0: unknown */
  char *note; /* a note's text (malloc'd), or NULL for a span */
} span;

struct mtc_trace {
  uint64_t origin_ns, open_ns;
  int32_t target;
  uint64_t leaves, bytes, chunks;
  span *spans;
  size_t count, capacity;
  size_t pending; /* first span whose DMA completion is not yet seen */
};

static pthread_once_t read_once = PTHREAD_ONCE_INIT;
static int to_stderr;

static void read_setting(void) {
  to_stderr = mtc_env_flag("MTC_TRACE") == 1; /* "off", "false", "2": off */
}

mtc_trace *mtc_trace_open(uint64_t origin_ns) {
  pthread_once(&read_once, read_setting);
  if (!to_stderr && !mtc_trace_file_enabled()) return NULL;
  mtc_trace *trace = calloc(1, sizeof *trace);
  if (trace == NULL) return NULL;
  trace->origin_ns = origin_ns;
  trace->open_ns = mtc_clock_ns();
  trace->target = MTC_DEVICE_CPU;
  return trace;
}

void mtc_trace_describe(mtc_trace *trace, int32_t target, uint64_t leaves,
                        uint64_t bytes, uint64_t chunks) {
  if (trace == NULL) return;
  trace->target = target;
  trace->leaves = leaves;
  trace->bytes = bytes;
  trace->chunks = chunks;
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
    if (s->done == NULL || s->done_ns != 0) continue;
    /* Waiting blocks in the driver: traced threads (a loader's workers)
     * must not spin against each other. */
    CUresult r = wait ? cu->cuEventSynchronize(s->done) : cu->cuEventQuery(s->done);
    if (r == CUDA_ERROR_NOT_READY) return;
    s->done_ns = mtc_clock_ns();
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

/* Records a timing event after the work just enqueued on device's stream,
 * for the last span. The events are the trace's own (created and destroyed
 * here): the device's pool holds events made without timing. */
static void follow(mtc_trace *trace, mtc_device *device) {
  const mtc_cuda_api *cu;
  if (trace->count == 0 || mtc_cuda_load(&cu) != MTC_OK) return;
  span *s = &trace->spans[trace->count - 1];
  if (cu->cuEventCreate(&s->done, 0) != CUDA_SUCCESS) {
    s->done = NULL;
    return;
  }
  if (cu->cuEventRecord(s->done, device->stream) != CUDA_SUCCESS) {
    cu->cuEventDestroy_v2(s->done);
    s->done = NULL;
    return;
  }
  s->device = device;
}

void mtc_trace_dma(mtc_trace *trace, mtc_device *device, const char *subject,
                   int64_t index, uint64_t bytes, uint64_t begin_ns) {
  if (trace == NULL) return;
  mtc_trace_span(trace, "issue", subject, index, bytes, begin_ns);
  follow(trace, device);
}

void mtc_trace_launch(mtc_trace *trace, mtc_device *device, const char *kernel,
                      uint64_t leaves, uint64_t bytes, uint64_t begin_ns) {
  if (trace == NULL) return;
  mtc_trace_span(trace, "launch", kernel, -1, bytes, begin_ns);
  if (trace->count > 0) trace->spans[trace->count - 1].leaves = leaves;
  follow(trace, device);
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

/* The GPU's completion times on the host clock. Once every traced event
 * completed, a last timing event recorded on the (now idle) stream and
 * waited for completes when the wait returns; each earlier event completed
 * cuEventElapsedTime before it. */
static void place_on_host_clock(mtc_trace *trace) {
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK || cu->cuEventElapsedTime == NULL) return;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  for (size_t i = 0; i < trace->count; i++) {
    mtc_device *device = trace->spans[i].device;
    if (device == NULL || trace->spans[i].gpu_end_ns != 0) continue;
    CUevent last = NULL;
    if (mtc_context_scope_use(&scope, device) != MTC_OK ||
        cu->cuEventCreate(&last, 0) != CUDA_SUCCESS) {
      break;
    }
    uint64_t last_ns = 0;
    if (cu->cuEventRecord(last, device->stream) == CUDA_SUCCESS &&
        cu->cuEventSynchronize(last) == CUDA_SUCCESS) {
      last_ns = mtc_clock_ns();
    }
    for (size_t j = i; j < trace->count && last_ns != 0; j++) {
      span *s = &trace->spans[j];
      float ms = 0;
      if (s->device != device || s->done == NULL ||
          cu->cuEventElapsedTime(&ms, s->done, last) != CUDA_SUCCESS) {
        continue;
      }
      uint64_t before = (uint64_t)((double)ms * 1e6);
      s->gpu_end_ns = before < last_ns ? last_ns - before : 1;
    }
    cu->cuEventDestroy_v2(last);
    if (last_ns == 0) break;
  }
  mtc_context_scope_end(&scope);
}

static double us(const mtc_trace *trace, uint64_t ns) {
  return ns < trace->origin_ns ? 0.0 : (double)(ns - trace->origin_ns) / 1e3;
}

static void print(const mtc_trace *trace, const char *outcome) {
  fprintf(stderr, "mtc trace: copy of %zu spans, %s (µs from submit)\n",
          trace->count, outcome);
  for (size_t i = 0; i < trace->count; i++) {
    const span *s = &trace->spans[i];
    if (s->note != NULL) {
      fprintf(stderr, "mtc trace: %9.1f               note  %s\n",
              us(trace, s->begin_ns), s->note);
      continue;
    }
    char done[48] = "";
    uint64_t done_ns = s->gpu_end_ns != 0 ? s->gpu_end_ns : s->done_ns;
    if (done_ns != 0) {
      snprintf(done, sizeof done, "  done %9.1f", us(trace, done_ns));
    }
    fprintf(stderr, "mtc trace: %9.1f .. %9.1f  %-5s %-6s %6lld %11llu B%s\n",
            us(trace, s->begin_ns), us(trace, s->end_ns), s->what, s->subject,
            (long long)s->index, (unsigned long long)s->bytes, done);
  }
}

/* The copy as Trace Event Format events: the copy (from the start of its
 * run; its planning is a span of the submitting thread's) on the thread
 * that ran it, each span there, each DMA and launch also on its
 * device's stream (from the previous completion there, or its issue, to its
 * own completion), and the notes as instants. */
static void write_events(const mtc_trace *trace, const char *outcome, uint64_t end_ns) {
  mtc_trace_text text = {0};
  char name[96], target[16] = "cpu";
  if (trace->target != MTC_DEVICE_CPU) snprintf(target, sizeof target, "cuda:%d", trace->target);
  snprintf(name, sizeof name, "copy to %s", target);
  mtc_trace_text_span(&text, 0, name, "copy", trace->open_ns, end_ns);
  mtc_trace_text_add(&text, ",\"target\":\"%s\",\"leaves\":%llu,\"bytes\":%llu,\"chunks\":%llu,"
                     "\"outcome\":\"%s\",\"submitted\":%.3f",
                     target, (unsigned long long)trace->leaves, (unsigned long long)trace->bytes,
                     (unsigned long long)trace->chunks, outcome, (double)trace->origin_ns / 1e3);
  mtc_trace_text_end(&text);
  uint64_t devices = 0, stream_free[64] = {0};
  for (size_t i = 0; i < trace->count; i++) {
    const span *s = &trace->spans[i];
    if (s->note != NULL) {
      mtc_trace_text_add(&text, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"cat\":\"note\",\"name\":",
                         (int)getpid(), (unsigned long long)mtc_trace_thread_id(), (double)s->begin_ns / 1e3);
      mtc_trace_text_string(&text, s->note);
      mtc_trace_text_add(&text, "},\n");
      continue;
    }
    int dma = strcmp(s->what, "issue") == 0;
    if (dma) {
      snprintf(name, sizeof name, "issue %s %lld", s->subject, (long long)s->index);
    } else if (s->index >= 0) {
      snprintf(name, sizeof name, "%s %s %lld", s->what, s->subject, (long long)s->index);
    } else {
      snprintf(name, sizeof name, "%s %s", s->what, s->subject);
    }
    mtc_trace_text_span(&text, 0, name, s->what, s->begin_ns, s->end_ns);
    mtc_trace_text_add(&text, ",\"subject\":\"%s\",\"index\":%lld,\"bytes\":%llu", s->subject,
                       (long long)s->index, (unsigned long long)s->bytes);
    if (s->leaves != 0) mtc_trace_text_add(&text, ",\"leaves\":%llu", (unsigned long long)s->leaves);
    mtc_trace_text_end(&text);
    if (s->device == NULL || s->gpu_end_ns == 0) continue;
    int d = s->device->ordinal & 63;
    uint64_t begin = stream_free[d] > s->begin_ns ? stream_free[d] : s->begin_ns;
    stream_free[d] = s->gpu_end_ns > begin ? s->gpu_end_ns : begin;
    devices |= UINT64_C(1) << d;
    snprintf(name, sizeof name, dma ? "DMA %s %lld" : "kernel %s", s->subject, (long long)s->index);
    mtc_trace_text_span(&text, mtc_trace_stream_track(d), name, dma ? "dma" : "kernel", begin, s->gpu_end_ns);
    mtc_trace_text_add(&text, ",\"subject\":\"%s\",\"index\":%lld,\"bytes\":%llu,\"issued\":%.3f", s->subject,
                       (long long)s->index, (unsigned long long)s->bytes, (double)s->end_ns / 1e3);
    if (s->leaves != 0) mtc_trace_text_add(&text, ",\"leaves\":%llu", (unsigned long long)s->leaves);
    mtc_trace_text_end(&text);
  }
  mtc_trace_file_write(&text, devices);
}

void mtc_trace_close(mtc_trace *trace, const char *outcome) {
  if (trace == NULL) return;
  uint64_t wait_ns = mtc_clock_ns();
  look(trace, 1);
  place_on_host_clock(trace);
  /* The trace's own wait for the copy: what trace mode adds to it. */
  mtc_trace_span(trace, "wait", "traced", -1, 0, wait_ns);
  if (to_stderr) print(trace, outcome);
  if (mtc_trace_file_enabled()) write_events(trace, outcome, mtc_clock_ns());
  const mtc_cuda_api *cu;
  int loaded = mtc_cuda_load(&cu) == MTC_OK;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  for (size_t i = 0; i < trace->count; i++) {
    span *s = &trace->spans[i];
    free(s->note);
    if (loaded && s->done != NULL && mtc_context_scope_use(&scope, s->device) == MTC_OK) {
      cu->cuEventDestroy_v2(s->done);
    }
  }
  mtc_context_scope_end(&scope);
  free(trace->spans);
  free(trace);
}
