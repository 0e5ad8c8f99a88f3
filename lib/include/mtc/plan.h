/* mtc/plan.h — mtc_plan, one copy: create, add leaves, submit, stop reading,
 * poll, wait, results, errors, release.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_PLAN_H
#define MTC_PUBLIC_PLAN_H

#ifndef MTC_H
#error "include mtc.h, not mtc/plan.h"
#endif

/* ------------------------------------------------------------------ plans */

/* One copy of many leaves to one target device. */
typedef struct mtc_plan mtc_plan;

/* mtc_leaf_result.flags */
enum {
  /* The leaf was already where it had to be: address is the input address
   * and block is NULL. Nothing was copied. */
  MTC_RESULT_REUSED = 1u,
  /* The leaf was packed into a chunk shared with other leaves. */
  MTC_RESULT_PACKED = 2u,
  /* The leaf was read (or written) in place in pinned host memory of the
   * library's, with no staging copy; with PACKED, its block holds the
   * neighbours it lay next to, at the same distances as on the host. */
  MTC_RESULT_DIRECT = 4u
};

/* Where one leaf landed. 32 bytes. */
typedef struct mtc_leaf_result {
  /* The leaf's copy (or the input itself when reused); 0 for 0-byte leaves. */
  uint64_t address;
  /* The block that owns address, or NULL (reused and 0-byte leaves). The
   * plan holds one reference to each block until it is released. */
  mtc_block *block;
  /* address - start of block. */
  uint64_t offset;
  /* MTC_DEVICE_CPU or the CUDA device that holds address. */
  int32_t device;
  /* MTC_RESULT_* bits. */
  uint32_t flags;
} mtc_leaf_result;

/* Creates an empty plan that copies to target_device (MTC_DEVICE_CPU or a
 * CUDA ordinal). options may be NULL for the defaults. Returns
 * MTC_ERR_INVALID_ARGUMENT for options out of range, MTC_ERR_NO_DRIVER or
 * MTC_ERR_NO_DEVICE for a CUDA target that cannot be served; then
 * *out_plan is NULL and mtc_last_error() says why. Every plan created must
 * be released once (mtc_plan_release). */
MTC_API mtc_status mtc_plan_create(int32_t target_device,
                                   const mtc_options *options,
                                   mtc_plan **out_plan);

/* Appends one leaf; its index (0, 1, ...) is written to *out_index when
 * out_index is not NULL. Only before submit (MTC_ERR_INVALID_STATE after).
 * The memory the leaf describes must stay valid and unchanged until the
 * copy has finished. Undefined: a released plan; memory that goes away (is
 * freed, unmapped or shrunk) while the copy may read it, which can crash
 * the process (mtc_plan_stop_reading exists for runtimes that free memory
 * on their way out). Memory that only changes gives old bytes, new bytes or
 * a mix. */
MTC_API mtc_status mtc_plan_add_leaf(mtc_plan *plan, const mtc_leaf *leaf,
                                     uint64_t *out_index);

/* Appends count leaves read from an array of mtc_leaf, in order. On error no
 * leaf of the call is added and mtc_plan_error_leaf() names the bad one.
 * The same rules as mtc_plan_add_leaf; undefined also: `leaves` holding
 * fewer than count entries. */
MTC_API mtc_status mtc_plan_add_leaves(mtc_plan *plan, const mtc_leaf *leaves,
                                       uint64_t count);

/* Sets leaves[first + k].address to view_k for each k < count (count <= 8),
 * leaving leaves whose view_k is NULL or whose bytes are 0 as they are. For
 * FFI layers that pass a typed array argument as its data pointer cheaply
 * but read that pointer back slowly (Deno): one call fills eight leaf
 * descriptors. Touches nothing else; needs no plan. Undefined: `leaves`
 * holding fewer than first + count entries. */
MTC_API mtc_status mtc_leaves_set_addresses(mtc_leaf *leaves, uint64_t first,
                                            uint32_t count, const void *view0,
                                            const void *view1, const void *view2,
                                            const void *view3, const void *view4,
                                            const void *view5, const void *view6,
                                            const void *view7);

/* Number of leaves added so far. 0 for NULL. */
MTC_API uint64_t mtc_plan_leaf_count(const mtc_plan *plan);

/* Starts the copy: lays the leaves out, then stages and submits them (on the
 * background thread when the plan's options say so). Returns at once in that
 * case; errors found later are reported by poll and wait. Once only. An
 * error ends the plan: poll and wait return it, and the plan can only be
 * released. A leaf on a CUDA device this machine lacks is reported here
 * (MTC_ERR_NO_DEVICE / MTC_ERR_NO_DRIVER, naming the leaf). A second submit
 * is MTC_ERR_INVALID_STATE and changes nothing (a failed plan keeps its
 * error). Undefined: a released plan. */
MTC_API mtc_status mtc_plan_submit(mtc_plan *plan);

/* From now on the plan reads none of its leaves' host memory; waits up to
 * timeout_ms for a read in progress to end. A copy already staged goes on
 * (the GPU reads the library's own pinned memory); one that still had host
 * leaves to stage fails with MTC_ERR_INVALID_STATE, naming the leaf. For
 * exit hooks of runtimes that free the memory of leaves while copies are in
 * flight (Deno at the end of a script or a worker). MTC_OK, or
 * MTC_IN_PROGRESS if a read was still running at the timeout (then do not
 * free that memory yet). Any thread. Undefined: a released plan, or a call
 * that may overlap mtc_plan_release of the same plan. libmtc itself does
 * this for every live plan when the process calls exit() or quick_exit()
 * (it registers that handler when the first plan is created). */
MTC_API mtc_status mtc_plan_stop_reading(mtc_plan *plan, uint32_t timeout_ms);

/* Returns MTC_OK when the copy has finished, MTC_IN_PROGRESS while it runs,
 * or the error that stopped it. Never blocks (except to write host
 * destinations, below). A copy into host destinations
 * (mtc_plan_add_leaves_into to MTC_DEVICE_CPU) writes them here, on the
 * calling thread, in the first poll or wait that finds its device work
 * over; it has finished only then. Undefined: a released plan (the call
 * reads freed memory), and a call that may overlap mtc_plan_release of the
 * same plan. */
MTC_API mtc_status mtc_plan_poll(mtc_plan *plan);

/* Blocks until the copy has finished (or failed) and returns as poll would,
 * writing host destinations as poll does. Waits for this copy only, not for
 * other work on the GPU. Safe to call from another thread than the one
 * polling the plan; a release on the other thread once this call blocks
 * waits for it to return (see mtc_plan_release). A binding whose wait runs
 * on another thread than the one that owns the host destinations (an FFI
 * "nonblocking" call) uses mtc_plan_wait_device. Undefined: a released
 * plan, and a release that may begin before this call does. */
MTC_API mtc_status mtc_plan_wait(mtc_plan *plan);

/* As mtc_plan_wait, but never writes host destinations: MTC_OK once the
 * copy's device work is over. A copy into host destinations has then still
 * to be finished by mtc_plan_poll or mtc_plan_wait on the thread that owns
 * them (mtc_plan_release drops that write instead). For FFI "nonblocking"
 * calls, which run on a thread of the runtime's. */
MTC_API mtc_status mtc_plan_wait_device(mtc_plan *plan);

/* As mtc_plan_poll, but never writes host destinations: MTC_OK once the
 * copy's device work is over (for a binding's garbage-collection backstop,
 * which must not write them at that moment, then releases the plan). */
MTC_API mtc_status mtc_plan_poll_device(mtc_plan *plan);

/* For a plan of copies into host memory: its poll or wait will not write
 * leaf `leaf`'s destination, because a copy submitted later writes it (a
 * binding keeps submission order this way when copies are awaited in
 * another order). Nothing if the destinations were written already.
 * MTC_ERR_INVALID_ARGUMENT for a leaf outside the plan or a plan that is
 * not one of copies into host memory. Threads: as mtc_plan_poll. */
MTC_API mtc_status mtc_plan_skip_copy_out(mtc_plan *plan, uint64_t leaf);

/* Writes results of leaves [first, first + count) to out. Only after poll or
 * wait returned MTC_OK (MTC_ERR_INVALID_STATE before, and for a failed
 * plan; MTC_ERR_INVALID_ARGUMENT for a range outside the plan). The blocks
 * written are the plan's: retain those you keep past mtc_plan_release.
 * Undefined: `out` holding fewer than count entries; a released plan. */
MTC_API mtc_status mtc_plan_results(mtc_plan *plan, uint64_t first,
                                    uint64_t count, mtc_leaf_result *out);

/* The message of the plan's last error, or "" if none. Valid until the plan
 * is released. "" for NULL. Undefined: a released plan. */
MTC_API const char *mtc_plan_last_error(const mtc_plan *plan);

/* Index in the plan (0, 1, ... over all adds) of the leaf that the plan's
 * last error is about, or -1. A copy that fails to allocate or enqueue
 * names the leaf it was copying; for leaves packed into one chunk, the
 * chunk's first leaf, and the message says how many more it packs. */
MTC_API int64_t mtc_plan_error_leaf(const mtc_plan *plan);

/* Releases the plan: waits for a copy in flight, returns staging memory to
 * its pool and drops the plan's block references (blocks retained by the
 * caller live on). NULL is ignored. A wait already blocked in another
 * thread (mtc_plan_wait, mtc_plan_wait_device, mtc_plan_completion_event:
 * an FFI call on a runtime's thread pool, say) is let finish first.
 * Undefined: releasing a plan twice (glibc may abort with "double free
 * detected", or worse), any call on it afterwards, and any other call on it
 * in another thread that may overlap the release (one that may begin once
 * the release has begun, mtc_plan_stop_reading, ...). */
MTC_API void mtc_plan_release(mtc_plan *plan);

#endif /* MTC_PUBLIC_PLAN_H */
