/* trace_file.h — MTC_TRACE_FILE=<path>: the copies' timelines written to one
 * file per process (a "%p" in the path is the process id) in the Trace Event
 * Format (the JSON that Perfetto and
 * chrome://tracing open). The file is a JSON object whose "traceEvents"
 * array grows as copies end; it is valid JSON after every write, so a
 * process that is killed leaves a readable file. Times are microseconds of
 * the monotonic clock; pid is the process, tid the thread (or, for what ran
 * on a GPU, a track per device's copy stream). */
#ifndef MTC_RUN_TRACE_FILE_H
#define MTC_RUN_TRACE_FILE_H

#include <stddef.h>
#include <stdint.h>

/* 1 when MTC_TRACE_FILE names a file (read once per process). */
int mtc_trace_file_enabled(void);

/* The clock now when the file is on, else 0 (nothing else is read). */
uint64_t mtc_trace_file_now(void);

/* A growing piece of JSON: the events of one copy, written in one go. */
typedef struct mtc_trace_text {
  char *data;
  size_t length, capacity;
  int failed; /* out of memory: the piece is dropped */
} mtc_trace_text;

/* Appends printf-formatted text. */
void mtc_trace_text_add(mtc_trace_text *text, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends s as a JSON string, quotes included. */
void mtc_trace_text_string(mtc_trace_text *text, const char *s);

/* The calling thread's id (tid), as the file names threads. */
uint64_t mtc_trace_thread_id(void);

/* The track of device ordinal's copy stream. */
uint64_t mtc_trace_stream_track(int ordinal);

/* Appends a complete event ("ph":"X") of the calling thread's, or of `tid`'s
 * track when tid is not 0, opening its args: the caller adds fields, each
 * starting with a comma, and closes with mtc_trace_text_end. */
void mtc_trace_text_span(mtc_trace_text *text, uint64_t tid, const char *name,
                         const char *category, uint64_t begin_ns,
                         uint64_t end_ns);

/* Closes the args and the event mtc_trace_text_span opened. */
void mtc_trace_text_end(mtc_trace_text *text);

/* Appends the text's events (each ending with ",\n"; naming the calling
 * thread and the copy streams of `devices`, a bit per ordinal, on first
 * sight) to the file and frees the text. */
void mtc_trace_file_write(mtc_trace_text *text, uint64_t devices);

/* One span of the calling thread straight to the file, outside any copy:
 * what a caller waits for, or what it takes from another thread. No-op when
 * the file is off or begin_ns is 0. */
void mtc_trace_file_span(const char *name, const char *category,
                         uint64_t leaves, uint64_t bytes, uint64_t begin_ns);

#endif
