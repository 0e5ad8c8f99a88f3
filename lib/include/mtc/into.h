/* mtc/into.h — mtc_plan_add_leaves_into, copies into memory that already
 * exists, and the destinations' blocks.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_INTO_H
#define MTC_PUBLIC_INTO_H

#ifndef MTC_H
#error "include mtc.h, not mtc/into.h"
#endif

/* ------------------------------------------- copies into existing memory */

/* mtc_leaf_result.flags of a leaf added with mtc_plan_add_leaves_into: the
 * result's address is its destination; block is NULL. */
enum { MTC_RESULT_INTO = 4u };

/* Appends count leaves, each copied into memory that already exists rather
 * than into a block the plan makes: leaves[k] is copied into
 * destinations[k], which is an mtc_leaf too (address, bytes, device and
 * element_size are read; row_count must be 0 or 1: destinations are
 * contiguous; row_pitch is ignored, and of the flags only MTC_LEAF_PINNED
 * is read). For CUDA graphs, decode
 * steps and reused buffers.
 *
 * Each destination must hold exactly the leaf's bytes, have the leaf's
 * element_size, and lie on the plan's target device (device memory of the
 * target, or host memory for MTC_DEVICE_CPU). Aliasing is refused, not
 * ordered: at submit, a destination that shares a byte with another
 * destination, with its own leaf, or with any other leaf's source on the
 * same device (a swap {a: X, b: Y} -> {a: Y, b: X}, a chain X -> Y -> Z,
 * views into one block) is MTC_ERR_INVALID_ARGUMENT naming the later leaf
 * (mtc_plan_error_leaf) and, in the message, the other one, before
 * anything is copied; the other checks are made here, and on error no leaf
 * of the call is added.
 *
 * A plan takes either leaves with destinations or leaves without them:
 * mixing this call with mtc_plan_add_leaf(s) on one plan is
 * MTC_ERR_INVALID_STATE. No leaf is reused: a leaf already on the target is
 * copied too.
 *
 * How each direction runs:
 *  - host -> device: packed leaves are staged into pinned memory together
 *    with a table of where each goes and placed by one scatter kernel a
 *    chunk: a chunk of up to 64 KiB (with its table) read where it lies in
 *    pinned staging, a larger one (or one staged in pageable memory) after
 *    one DMA into a scratch block of the target (without kernels, one DMA a
 *    leaf from the staging); large leaves are
 *    streamed through pinned pieces straight into their destination.
 *  - device -> the same device: the packed leaves by one kernel launch
 *    writing every destination (without kernels one copy a leaf), large
 *    leaves one copy each. Device -> another device: the same launch on
 *    the source device when every packed leaf's destination was named a
 *    block of libmtc's (mtc_plan_set_destination_blocks) and the pair has
 *    peer access; otherwise, and for large leaves, one peer copy a leaf (a
 *    destination may come from any allocator, which a kernel on the source
 *    device might not reach).
 *  - device -> host: into pinned memory as for mtc_plan_add_leaves (the
 *    gather kernel), then copied into the destinations by the caller's
 *    mtc_plan_poll or mtc_plan_wait that finds the copy's device work over,
 *    on the calling thread; the plan is done only after that. Never by
 *    mtc_plan_release (which drops the write), nor by a library thread or
 *    another copy's staging request at the pinned pool's limit.
 *  - host -> host: likewise, copied by that poll or wait (the sources are
 *    read then).
 *
 * Ordering: plans reach the copy streams in the order they were submitted,
 * whether carried out by the background thread or on the caller's thread,
 * so two copies into one device destination land in submission order. Two
 * copies into one host destination land in the order their polls or waits
 * write them: poll them in submission order, or mark the earlier plan's
 * leaf with mtc_plan_skip_copy_out. With a stream of the caller's set on
 * the target (mtc_plan_set_stream), the copy writes destinations only
 * after the work queued there before submit, so a kernel still reading the
 * previous contents is not overwritten under it; the stream then waits for
 * the copy as for any plan.
 *
 * Ownership: the caller keeps the destination memory; it must stay valid,
 * and nobody else may read or write it, until the copy has finished (poll
 * or wait returned MTC_OK, or mtc_plan_release returned). Host
 * destinations are written only inside the caller's poll or wait, so a
 * caller that frees one first must release the plan instead of polling it. Results
 * (mtc_plan_results) give each destination's address, MTC_RESULT_INTO and
 * no block. mtc_plan_stop_reading stops the writes into host destinations
 * as well as the reads (a copy that still had to write them fails with
 * MTC_ERR_INVALID_STATE). Threads: as mtc_plan_add_leaves. Undefined: either
 * array holding fewer than count entries. */
MTC_API mtc_status mtc_plan_add_leaves_into(mtc_plan *plan,
                                            const mtc_leaf *leaves,
                                            const mtc_leaf *destinations,
                                            uint64_t count);

/* For a plan of copies into existing memory (mtc_plan_add_leaves_into):
 * says which destinations lie in device blocks of libmtc's (from
 * mtc_device_block_alloc, or the results of a copy): blocks[k] holds the
 * destination of leaf first + k, or is NULL for memory of any other
 * origin. Between two GPUs this decides the path: the packed leaves of a
 * source device go by one gather kernel launched on the source device,
 * writing into the target's memory over peer access, only when the pair
 * has peer access and every one of their destinations is such a block
 * (libmtc opens its own pool to the source device; memory of another
 * allocator may be out of a kernel's reach there, and a stray write would
 * be fatal to the context); otherwise each takes one peer copy, which
 * reaches any memory. MTC_TRACE=1 prints which path each source device
 * took and why. Nothing else changes: results, ordering and ownership are
 * as for mtc_plan_add_leaves_into.
 *
 * Each block is checked, not trusted: it must be a device block on the
 * destination's device holding all of the destination's bytes. The plan
 * retains each block until it is released; a later call for the same
 * leaf replaces its block. Errors, with nothing recorded:
 * MTC_ERR_INVALID_STATE after submit or on a plan of plain leaves;
 * MTC_ERR_INVALID_ARGUMENT for leaves past the plan's count, blocks NULL
 * with count > 0, or a block that fails its check (naming the leaf,
 * mtc_plan_error_leaf). Threads: as mtc_plan_add_leaves. Undefined: blocks
 * holding fewer than count entries, or an entry that is not a live
 * block. */
MTC_API mtc_status mtc_plan_set_destination_blocks(mtc_plan *plan,
                                                   uint64_t first,
                                                   mtc_block *const *blocks,
                                                   uint64_t count);

#endif /* MTC_PUBLIC_INTO_H */
