/* mtc/streams.h — streams (mtc_stream_*), events (mtc_event), a plan's
 * streams and its completion event.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_STREAMS_H
#define MTC_PUBLIC_STREAMS_H

#ifndef MTC_H
#error "include mtc.h, not mtc/streams.h"
#endif

/* ---------------------------------------------------------------- streams */

/* Streams are CUstream handles carried as uint64_t, so that streams made by
 * other libraries (PyTorch, CuPy, ...) can be passed in as they are. 0 is
 * "no stream" (never the legacy default stream). */

/* Creates a non-blocking stream on device's primary context and writes its
 * CUstream to *out_stream. Destroy it with mtc_stream_destroy. */
MTC_API mtc_status mtc_stream_create(int32_t device, uint64_t *out_stream);

/* Destroys a stream made by mtc_stream_create (work queued on it still
 * runs). 0 is ignored; a failure sets mtc_last_error() only. */
MTC_API void mtc_stream_destroy(int32_t device, uint64_t stream);

/* Blocks until all work queued on stream (of device) has finished.
 * MTC_ERR_INVALID_ARGUMENT for stream 0. */
MTC_API mtc_status mtc_stream_synchronize(int32_t device, uint64_t stream);

/* A recorded CUDA event and the device it belongs to; refcounted. */
typedef struct mtc_event mtc_event;

/* Records a new event on stream (of device): it completes when all work
 * queued on stream before this call has finished. Writes a new reference
 * (release it with mtc_event_release) to *out_event, or NULL on error.
 * MTC_ERR_INVALID_ARGUMENT for stream 0. */
MTC_API mtc_status mtc_event_record(int32_t device, uint64_t stream,
                                    mtc_event **out_event);

/* Makes work queued on stream (of device) after this call wait for event,
 * without blocking the host. The event may belong to another device. */
MTC_API mtc_status mtc_stream_wait_event(int32_t device, uint64_t stream,
                                         const mtc_event *event);

/* MTC_OK when the event has completed, MTC_IN_PROGRESS when not; never
 * blocks. */
MTC_API mtc_status mtc_event_query(const mtc_event *event);

/* Blocks until the event has completed. */
MTC_API mtc_status mtc_event_synchronize(const mtc_event *event);

/* The event's CUevent, for other libraries to wait on; valid while a
 * reference is held. 0 for NULL. */
MTC_API uint64_t mtc_event_handle(const mtc_event *event);

/* Adds / drops a reference. The last release destroys the event. NULL is
 * ignored. Any thread. Undefined: more releases than references, and any
 * use of the event after the last one. */
MTC_API void mtc_event_retain(mtc_event *event);
MTC_API void mtc_event_release(mtc_event *event);

/* Tells the plan which stream of `device` the caller's work runs on. Only
 * before submit; one stream per device: a second call for the same device
 * replaces the first, and stream 0 removes it. The stream is used at
 * submit only (an invalid one is reported there, naming the device), and
 * only where the plan reads leaves on `device` or copies to it. At submit:
 *  - leaves on `device` are read only after the work queued on `stream`
 *    before submit (an event recorded on it at submit time);
 *  - when `device` is the plan's target, `stream` waits for the copy's
 *    completion, so work queued on it after submit sees the copied data
 *    with no host synchronization. Submission then enqueues the copy on the
 *    calling thread (staging included) before it returns, whatever
 *    use_background_thread says, since the wait must be queued before the
 *    caller's next work.
 * poll and wait still wait for this copy only, never for the caller's
 * streams. */
MTC_API mtc_status mtc_plan_set_stream(mtc_plan *plan, int32_t device,
                                       uint64_t stream);

/* After submit: writes a new reference to an event that completes with the
 * copy (on the target device; on the source device for copies to the host,
 * the first one when there are several: one event covers all of the copy's
 * device work) to *out_event, or NULL when the copy needs no device work.
 * Release it with mtc_event_release; it may outlive the plan. While a
 * background submission is still staging, this waits until the copy is
 * enqueued (not until it completes). After a failed submit it returns the
 * plan's error. */
MTC_API mtc_status mtc_plan_completion_event(mtc_plan *plan,
                                             mtc_event **out_event);

#endif /* MTC_PUBLIC_STREAMS_H */
