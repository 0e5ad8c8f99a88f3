/* trace.h — MTC_TRACE=1: a timeline of each copy on stderr, for finding
 * where a copy's time goes; MTC_TRACE_FILE=<path>: the same timelines in a
 * file that Perfetto and chrome://tracing open (run/trace_file.h). Every
 * staging, allocation, enqueue and wait of the submission is a span (start
 * and end on the host clock); every DMA and kernel launch also gets the time
 * it completed on the GPU, from a timing event recorded right after it
 * (the library's own events are made without timing; these exist only in
 * trace mode). Tracing makes the submitting thread wait for the copy before
 * it writes, so back-to-back copies no longer overlap: a diagnostic, not a
 * mode to measure speed in. Off, it costs one pointer test per span. */
#ifndef MTC_RUN_TRACE_H
#define MTC_RUN_TRACE_H

#include <stdint.h>

#include "base/clock.h"
#include "cuda/device.h"

typedef struct mtc_trace mtc_trace;

/* A new trace of a copy submitted at origin_ns, or NULL when MTC_TRACE and
 * MTC_TRACE_FILE are off (or out of memory: tracing is best effort). */
mtc_trace *mtc_trace_open(uint64_t origin_ns);

/* What the copy is: its target device (MTC_DEVICE_CPU for the host), its
 * leaves and their bytes, and its packed chunks. No-op on NULL. */
void mtc_trace_describe(mtc_trace *trace, int32_t target, uint64_t leaves,
                        uint64_t bytes, uint64_t chunks);

/* The start of a span: the clock, read only while tracing (the copy's hot
 * path pays nothing for the trace when it is off). */
static inline uint64_t mtc_trace_now(const mtc_trace *trace) {
  return trace != NULL ? mtc_clock_ns() : 0;
}

/* Adds a span: `what` (a string literal: "stage", "alloc", "issue", "wait")
 * of `subject` ("chunk", "leaf", ...) number `index`, of `bytes`, from
 * begin_ns to now. No-op on NULL. */
void mtc_trace_span(mtc_trace *trace, const char *what, const char *subject,
                    int64_t index, uint64_t bytes, uint64_t begin_ns);

/* After a DMA was enqueued on device's copy stream (its context current):
 * adds its issue span (begin_ns to now) and records a timing event after it,
 * whose completion close() reports. No-op on NULL. */
void mtc_trace_dma(mtc_trace *trace, mtc_device *device, const char *subject,
                   int64_t index, uint64_t bytes, uint64_t begin_ns);

/* The same for a kernel launch of `leaves` leaves (a gather): its span is a
 * "launch", its GPU part a kernel. No-op on NULL. */
void mtc_trace_launch(mtc_trace *trace, mtc_device *device, const char *kernel,
                      uint64_t leaves, uint64_t bytes, uint64_t begin_ns);

/* Adds a line of text at this moment: which path a part of the copy took
 * and why ("cuda:1 -> cuda:0: 12 packed leaves by one gather launch ...").
 * No-op on NULL. */
void mtc_trace_note(mtc_trace *trace, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Waits for every traced DMA and launch, writes the timeline (stderr, the
 * file) and frees the trace. No-op on NULL. */
void mtc_trace_close(mtc_trace *trace, const char *outcome);

#endif
