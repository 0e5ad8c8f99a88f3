/* mtc/pinned.h — pinned host memory the caller holds and fills (pinned
 * tensors, arenas), which copies read and write in place, and its limit.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_PINNED_H
#define MTC_PUBLIC_PINNED_H

#ifndef MTC_H
#error "include mtc.h, not mtc/pinned.h"
#endif

/* ----------------------------------------------------- pinned host memory */

/* Allocates `bytes` (> 0) of page-locked host memory as a new block with
 * one reference, written to *out_block (mtc_block_get_info gives its
 * address; the capacity is rounded up to the pinned pool's size classes,
 * powers of two from 64 KiB, and comes from the pool when an idle buffer
 * fits). `device` is the CUDA device whose context allocates it; the
 * memory is usable by every device. Its contents are undefined.
 *
 * The caller fills it and adds leaves inside it with MTC_LEAF_PINNED: a
 * copy to a device then DMAs them from where they lie, with no staging
 * copy; leaves lying near each other in one block go as one DMA, into one
 * device block that keeps their distances. A copy into destinations inside
 * it (mtc_plan_add_leaves_into, from a device) writes them in place by the
 * GPU, with no copy-out. Such copies read or write the memory after
 * mtc_plan_submit returns, until the plan's completion: writing it
 * meanwhile changes what is copied. mtc_block_busy says when it may be
 * written again. A copy holds a reference to the block until it is over.
 *
 * What callers hold this way counts against its own limit, not the
 * pinned pool's (staging would otherwise wait for memory only the caller
 * can give back): mtc_set_pinned_held_limit, default a quarter of the
 * physical memory, at most 8 GiB, or MTC_PINNED_HELD_LIMIT (bytes, k/m/g/t
 * suffixes).
 *
 * With no CUDA driver (it cannot be loaded), or a driver that sees no
 * device, nothing can page-lock memory and no copy can read it by DMA: the
 * block is then pageable host memory of the same size (malloc'd, aligned
 * for any element type), used and released the same way, so that code
 * written for both kinds of machine runs on either. It is not pinned:
 * mtc_block_get_info says so (`pinned` is 0), it counts against
 * no limit, and leaves in it are no MTC_LEAF_PINNED leaves.
 *
 * Errors: MTC_ERR_INVALID_ARGUMENT (negative device, 0 bytes),
 * MTC_ERR_NO_DEVICE (an ordinal past the devices of a machine that has
 * some), MTC_ERR_OUT_OF_MEMORY past that limit (the message names it) or
 * when the driver has none. Any thread. */
MTC_API mtc_status mtc_host_block_alloc(int32_t device, uint64_t bytes,
                                        mtc_block **out_block);

/* 1 while a copy submitted so far reads or writes pinned block `block`
 * (a leaf or destination flagged MTC_LEAF_PINNED that lies in it, whatever
 * its layout or direction): from its mtc_plan_submit until its device work
 * is over, whether or not anyone polls it; for a copy into host
 * destinations that reads or writes the block on the host at its copy-out,
 * until the caller's poll or wait that copies out (or the plan's release).
 * Else 0 (also for NULL and blocks of other kinds). Once it is 0, writes
 * to the memory reach no copy submitted before. Any thread. */
MTC_API int32_t mtc_block_busy(mtc_block *block);

/* Blocks until mtc_block_busy(block) would be 0 for the copies submitted
 * before this call. MTC_ERR_CUDA when the driver reports a failed copy;
 * MTC_IN_PROGRESS once the device work is over if all that is left is a
 * copy-out, which only a poll or wait of that plan's caller does (waiting
 * for it here could wait for this very thread). Any thread. */
MTC_API mtc_status mtc_block_wait_idle(mtc_block *block);

/* Sets the limit on pinned memory held through mtc_host_block_alloc
 * (1 MiB .. 1 PiB, else MTC_ERR_INVALID_ARGUMENT); blocks held already
 * stay. Any thread. */
MTC_API mtc_status mtc_set_pinned_held_limit(uint64_t bytes);

#endif /* MTC_PUBLIC_PINNED_H */
