/*
 * mtc.h — the whole public C ABI of multi-tensor-copier (libmtc), and the one
 * header to include: its topics lie in headers of their own under mtc/, which
 * it includes in order (Contents, below).
 *
 * libmtc moves nested batches of many small tensors between host memory and
 * CUDA GPUs. Callers describe each tensor ("leaf") by address and size; the
 * library packs small host leaves into a few staging chunks, copies each chunk
 * with one asynchronous DMA, and hands back where every leaf landed.
 *
 * Life cycle of one copy (a "plan"):
 *
 *     mtc_options opts = MTC_OPTIONS_INIT;
 *     mtc_plan *plan;
 *     if (mtc_plan_create(0, &opts, &plan) != MTC_OK) puts(mtc_last_error());
 *     mtc_plan_add_leaves(plan, leaves, n);        // or mtc_plan_add_leaf, once per leaf
 *     mtc_plan_submit(plan);                       // returns at once
 *     while (mtc_plan_poll(plan) == MTC_IN_PROGRESS) do_other_work();
 *     mtc_plan_results(plan, 0, n, results);       // where each leaf landed
 *     for (...) mtc_block_retain(results[i].block); // keep outputs past the plan
 *     mtc_plan_release(plan);
 *
 * Conventions
 *  - Every fallible call returns an mtc_status. On failure the message is
 *    readable with mtc_plan_last_error() for calls on a plan, and with
 *    mtc_last_error() (per thread) for every call.
 *  - Release functions accept NULL.
 *  - The CUDA driver (libcuda.so.1) is loaded on first use, never linked.
 *    Without it, host-only copies still work and asking for a CUDA device
 *    returns MTC_ERR_NO_DRIVER with a message saying why.
 *  - Threads: different plans may be used from different threads at once.
 *    One plan must not be used from two threads at the same time.
 *    Blocks may be retained and released from any thread.
 *  - Structs passed in are size-prefixed (first field struct_size) and only
 *    grow at the end, so older callers keep working.
 *  - A call that a plan rejects for misuse (MTC_ERR_INVALID_STATE, such as a
 *    second submit, or MTC_ERR_INVALID_ARGUMENT) returns its status with its
 *    message in mtc_last_error(). A plan that has failed keeps the error
 *    that ended it: poll and wait go on reporting that status, and
 *    mtc_plan_last_error() its message.
 *  - Misuse the library cannot detect is undefined behavior, as with free():
 *    each function says which. In short: a handle (plan, block, event) used
 *    after its last release, released more often than it was retained or
 *    created, or used from two threads at once where that is not allowed;
 *    out-parameters and arrays smaller than the call says; leaf memory that
 *    is freed, unmapped or changed while the copy reads it. Such a program
 *    may read freed memory, crash, or abort (glibc's "double free
 *    detected").
 *
 * Contents: mtc.h is the one header to include; each topic lies in its own
 * header under mtc/, included below in this order (a topic uses only those
 * before it):
 *
 *   mtc/version.h        the library's version: MTC_VERSION_*,
 *                        mtc_version_number, mtc_version_string
 *   mtc/status.h         mtc_status, its names, and the last error of the
 *                        calling thread
 *   mtc/devices.h        MTC_DEVICE_CPU, the CUDA devices there are and the
 *                        current one, their names, memory and peer access,
 *                        the driver's version and file
 *   mtc/options.h        mtc_options, the knobs of one copy, and their
 *                        defaults (MTC_OPTIONS_INIT)
 *   mtc/leaf.h           mtc_leaf, one tensor to copy, and its flags
 *   mtc/block.h          mtc_block, the refcounted memory copies land in:
 *                        retain, release, info
 *   mtc/plan.h           mtc_plan, one copy: create, add leaves, submit, stop
 *                        reading, poll, wait, results, errors, release
 *   mtc/layout.h         mtc_leaf_layout: a strided host leaf's shape and byte
 *                        strides
 *   mtc/stats.h          the library's counters and its pools: trim, the
 *                        pinned limit, warm-up
 *   mtc/streams.h        streams (mtc_stream_*), events (mtc_event), a plan's
 *                        streams and its completion event
 *   mtc/plan_stats.h     mtc_plan_stats, what one plan did, and the
 *                        device-to-host paths
 *   mtc/test_kernels.h   mtc_has_kernels and the debug kernels for tests and
 *                        demonstrations
 *   mtc/dlpack.h         DLPack 1.x: its declarations, export of a block,
 *                        import as a leaf
 *   mtc/into.h           mtc_plan_add_leaves_into, copies into memory that
 *                        already exists, and the destinations' blocks
 *   mtc/prepared.h       prepared copies: a batch's structure laid out once,
 *                        each batch of it submitted by one call
 *   mtc/kernels.h        device blocks of their own, the caller's modules and
 *                        kernel launches
 *   mtc/pinned.h         pinned host memory the caller holds (pinned tensors,
 *                        arenas), read and written in place by copies; its
 *                        limit
 *   mtc/owner.h          owners: the references each thread holds, given
 *                        back when it exits, and parcels that move them
 *                        between threads
 */
#ifndef MTC_H
#define MTC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MTC_API __attribute__((visibility("default")))
#else
#define MTC_API
#endif

#include "mtc/version.h"
#include "mtc/status.h"
#include "mtc/devices.h"
#include "mtc/options.h"
#include "mtc/leaf.h"
#include "mtc/block.h"
#include "mtc/plan.h"
#include "mtc/layout.h"
#include "mtc/stats.h"
#include "mtc/streams.h"
#include "mtc/plan_stats.h"
#include "mtc/test_kernels.h"
#include "mtc/dlpack.h"
#include "mtc/into.h"
#include "mtc/prepared.h"
#include "mtc/kernels.h"
#include "mtc/pinned.h"
#include "mtc/owner.h"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MTC_H */
