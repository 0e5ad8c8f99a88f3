/* event.h — mtc_event: a refcounted CUevent and the device it belongs to.
 * Plans hand their completion event out as one; mtc_event_record makes one
 * for callers. The CUevent comes from the device's free list and goes back
 * to it with the last reference. */
#ifndef MTC_EVENT_H
#define MTC_EVENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "cuda/device.h"
#include "mtc.h"

struct mtc_event {
  atomic_uint_fast64_t refs;
  mtc_device *device;
  CUevent event;
};

/* Wraps event (of device, from mtc_device_event_acquire) in an mtc_event
 * with one reference, which now owns it. On failure the event goes back to
 * the device and the thread's last error is set. */
mtc_status mtc_event_wrap(mtc_device *device, CUevent event, mtc_event **out);

/* mtc_event objects alive (for leak checks in tests). */
uint64_t mtc_event_live_count(void);

#endif
