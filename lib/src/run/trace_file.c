/* trace_file.c — MTC_TRACE_FILE: the Trace Event Format file (see
 * trace_file.h). */
#include "run/trace_file.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"

/* Tracks of the copy streams: far above any thread id Linux hands out. */
#define STREAM_TRACK_BASE 4000000000u
#define NAMED_MAX 1024

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *file;
static long trailer_at; /* where the closing "]}" starts: the next write goes there */
static int written;     /* pieces written so far (0: the array is empty) */
static int write_failed; /* a write failed (said once on stderr) */
static uint64_t named[NAMED_MAX]; /* threads and tracks already named */
static size_t named_count;
static uint64_t streams_named; /* bit per ordinal */

/* The path with "%p" replaced by the process id: child processes that
 * inherit MTC_TRACE_FILE then write files of their own. 0 when it does not
 * fit `size` bytes (never cut short: a cut path is another file). */
static int expand(const char *pattern, char *path, size_t size) {
  size_t n = 0;
  for (const char *c = pattern; *c != '\0'; c++) {
    if (n + 1 >= size) return 0;
    if (c[0] == '%' && c[1] == 'p') {
      int w = snprintf(path + n, size - n, "%d", (int)getpid());
      if (w < 0 || (size_t)w >= size - n) return 0;
      n += (size_t)w;
      c++;
    } else {
      path[n++] = *c;
    }
  }
  path[n] = '\0';
  return 1;
}

/* Says on stderr, once, why tracing to the file is off. */
static void say_off(const char *path, const char *why) {
  fprintf(stderr, "mtc trace: cannot write MTC_TRACE_FILE %.200s%s: %s; tracing to it is off\n", path,
          strlen(path) > 200 ? "..." : "", why);
}

static void open_file(void) {
  const char *pattern = getenv("MTC_TRACE_FILE");
  if (pattern == NULL || pattern[0] == '\0') return;
  char path[4096];
  if (!expand(pattern, path, sizeof path)) {
    say_off(pattern, "the path is longer than 4095 bytes (once %p is the process id)");
    return;
  }
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    say_off(path, strerror(errno));
    return;
  }
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"writer\":\"libmtc\"},\"traceEvents\":[\n");
  trailer_at = ftell(f);
  fputs("]}\n", f);
  if (fflush(f) != 0 || ferror(f)) {
    say_off(path, strerror(errno));
    fclose(f);
    return;
  }
  file = f;
}

int mtc_trace_file_enabled(void) {
  pthread_once(&open_once, open_file);
  return file != NULL;
}

uint64_t mtc_trace_file_now(void) {
  return mtc_trace_file_enabled() ? mtc_clock_ns() : 0;
}

static void grow(mtc_trace_text *text, size_t more) {
  if (text->failed || text->length + more + 1 <= text->capacity) return;
  size_t capacity = text->capacity ? text->capacity : 4096;
  while (capacity < text->length + more + 1) capacity *= 2;
  char *data = realloc(text->data, capacity);
  if (data == NULL) {
    text->failed = 1;
    return;
  }
  text->data = data;
  text->capacity = capacity;
}

void mtc_trace_text_add(mtc_trace_text *text, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(NULL, 0, format, args);
  va_end(args);
  if (n < 0) return;
  grow(text, (size_t)n);
  if (text->failed) return;
  va_start(args, format);
  vsnprintf(text->data + text->length, (size_t)n + 1, format, args);
  va_end(args);
  text->length += (size_t)n;
}

void mtc_trace_text_string(mtc_trace_text *text, const char *s) {
  mtc_trace_text_add(text, "\"");
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      mtc_trace_text_add(text, "\\%c", c);
    } else if (c < 0x20) {
      mtc_trace_text_add(text, "\\u%04x", c);
    } else {
      mtc_trace_text_add(text, "%c", c);
    }
  }
  mtc_trace_text_add(text, "\"");
}

uint64_t mtc_trace_thread_id(void) { return (uint64_t)syscall(SYS_gettid); }

uint64_t mtc_trace_stream_track(int ordinal) {
  return STREAM_TRACK_BASE + (uint64_t)ordinal;
}

static double micros(uint64_t ns) { return (double)ns / 1e3; }

void mtc_trace_text_span(mtc_trace_text *text, uint64_t tid, const char *name,
                         const char *category, uint64_t begin_ns,
                         uint64_t end_ns) {
  if (tid == 0) tid = mtc_trace_thread_id();
  if (end_ns < begin_ns) end_ns = begin_ns;
  mtc_trace_text_add(text, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f,\"cat\":\"%s\",\"name\":",
                     (int)getpid(), (unsigned long long)tid, micros(begin_ns),
                     micros(end_ns - begin_ns), category);
  mtc_trace_text_string(text, name);
  mtc_trace_text_add(text, ",\"args\":{\"thread\":%llu", (unsigned long long)mtc_trace_thread_id());
}

void mtc_trace_text_end(mtc_trace_text *text) { mtc_trace_text_add(text, "}},\n"); }

/* A metadata event naming a thread or a track. */
static void name_track(FILE *f, uint64_t tid, const char *name) {
  fprintf(f, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}",
          written++ ? ",\n" : "", (int)getpid(), (unsigned long long)tid, name);
}

/* Names the calling thread and the streams of `devices` once (under the lock). */
static void name_tracks(FILE *f, uint64_t devices) {
  uint64_t tid = mtc_trace_thread_id();
  int seen = 0;
  for (size_t i = 0; i < named_count && !seen; i++) seen = named[i] == tid;
  if (!seen && named_count < NAMED_MAX) {
    char thread[16] = "", name[64];
    pthread_getname_np(pthread_self(), thread, sizeof thread);
    for (char *c = thread; *c != '\0'; c++) {
      if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
    }
    snprintf(name, sizeof name, "%s thread %llu", thread[0] ? thread : "a", (unsigned long long)tid);
    name_track(f, tid, name);
    named[named_count++] = tid;
  }
  for (int d = 0; d < 64; d++) {
    if (!(devices >> d & 1) || (streams_named >> d & 1)) continue;
    char name[48];
    snprintf(name, sizeof name, "cuda:%d copy stream (GPU time)", d);
    name_track(f, mtc_trace_stream_track(d), name);
    streams_named |= UINT64_C(1) << d;
  }
}

void mtc_trace_file_write(mtc_trace_text *text, uint64_t devices) {
  if (mtc_trace_file_enabled() && !text->failed && text->length >= 2) {
    text->length -= 2; /* the last event's ",\n" */
    pthread_mutex_lock(&file_lock);
    if (write_failed) {
      pthread_mutex_unlock(&file_lock);
      free(text->data);
      memset(text, 0, sizeof *text);
      return;
    }
    fseek(file, trailer_at, SEEK_SET);
    name_tracks(file, devices);
    fprintf(file, "%s%.*s", written ? ",\n" : "", (int)text->length, text->data);
    written++;
    trailer_at = ftell(file);
    fputs("\n]}\n", file);
    if (!write_failed && (fflush(file) != 0 || ferror(file))) {
      write_failed = 1; /* said once; later copies go on untraced in the file */
      fprintf(stderr, "mtc trace: writing MTC_TRACE_FILE failed: %s; the file holds the copies before\n",
              strerror(errno));
    }
    pthread_mutex_unlock(&file_lock);
  }
  free(text->data);
  memset(text, 0, sizeof *text);
}

void mtc_trace_file_span(const char *name, const char *category,
                         uint64_t leaves, uint64_t bytes, uint64_t begin_ns) {
  if (begin_ns == 0 || !mtc_trace_file_enabled()) return;
  mtc_trace_text text = {0};
  mtc_trace_text_span(&text, 0, name, category, begin_ns, mtc_clock_ns());
  mtc_trace_text_add(&text, ",\"leaves\":%llu,\"bytes\":%llu", (unsigned long long)leaves,
                     (unsigned long long)bytes);
  mtc_trace_text_end(&text);
  mtc_trace_file_write(&text, 0);
}
