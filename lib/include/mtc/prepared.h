/* mtc/prepared.h — prepared copies: a batch's structure laid out once, then
 * each batch of that structure made into a plan and submitted by one call.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_PREPARED_H
#define MTC_PUBLIC_PREPARED_H

#ifndef MTC_H
#error "include mtc.h, not mtc/prepared.h"
#endif

/* --------------------------------------------------------- prepared copies */

/* The template of a copy: a target, options, leaves (and destinations),
 * strided layouts, and the layout that mtc_plan_submit would work out for
 * them. Callers that copy batches of one structure every step (the same
 * leaves, sizes and devices; only the addresses change) make one from the
 * first batch's plan and then submit each batch with mtc_prepared_submit,
 * which checks only what depends on the addresses and skips the planner. */
typedef struct mtc_prepared mtc_prepared;

/* Makes a prepared copy of `plan`, a plan built (mtc_plan_create,
 * mtc_plan_add_leaves or mtc_plan_add_leaves_into, mtc_plan_set_leaf_layout)
 * and not submitted: it copies the plan's target, options, leaves,
 * destinations and leaf layouts, lays them out as mtc_plan_submit would for
 * leaves that lie in no pinned memory, and checks now what submit would
 * check before copying (a leaf on a CUDA device this machine lacks:
 * MTC_ERR_NO_DEVICE or MTC_ERR_NO_DRIVER; destinations that overlap each
 * other or a source: MTC_ERR_INVALID_ARGUMENT; each naming the leaf in the
 * message). The plan is only read: it stays the caller's, to submit or to
 * release (it is never submitted by this call).
 *
 * Streams (mtc_plan_set_stream) and destination blocks
 * (mtc_plan_set_destination_blocks) belong to one copy, not to a
 * structure: a plan that has any is MTC_ERR_INVALID_ARGUMENT. Set them on
 * each plan made by mtc_prepared_plan instead.
 *
 * Errors: MTC_ERR_INVALID_ARGUMENT for NULL plan or out; MTC_ERR_INVALID_STATE
 * for a plan already submitted; MTC_ERR_OUT_OF_MEMORY. On error *out is
 * NULL and mtc_last_error() says why. Every prepared copy made must be
 * released once (mtc_prepared_release). Threads: as a call on the plan.
 *
 * A plan into device memory whose host leaves are packed (no leaf flagged
 * MTC_LEAF_PINNED) has its scatter tables written to a block on the target
 * here, once: its plans with the prepared copy's own destinations
 * (destinations NULL) read them instead of staging a table per copy. The
 * block counts in mtc_stats' blocks_live and device_bytes_live (24 bytes a
 * packed leaf) until the prepared copy and its last plan are released. If
 * it cannot be made (no device memory, no kernels) the plans stage their
 * tables as before; that is not an error.
 * Undefined: a released plan. */
MTC_API mtc_status mtc_prepared_create(mtc_plan *plan, mtc_prepared **out);

/* Makes a plan of the prepared copy for one batch and submits it, in one
 * call; the plan is written to *out_plan, to poll, wait, read and release
 * as any plan (mtc_plan_release: every plan made must be released once).
 *
 * leaves: count leaves, count being the prepared copy's leaf count; each
 * must equal the prepared copy's leaf of its index in every field but
 * `address` (the message names the leaf and the field that differs).
 * destinations: NULL for the prepared copy's own destinations (a copy into
 * existing memory with fixed destinations, or a copy with none), else
 * count destinations, each equal to the prepared copy's in every field but
 * `address`; a prepared copy of a plan without destinations takes none.
 * The addresses are checked as mtc_plan_add_leaves and
 * mtc_plan_add_leaves_into check them (0 with bytes, past the end of the
 * address space, a strided layout's reach included) and, when any of them
 * differs from the prepared copy's, the destinations for overlaps as at
 * submit. Leaf layouts come from the prepared copy.
 *
 * The plan reuses the prepared copy's layout (a copy of it: a plan never
 * reads the prepared copy after this call returns; it holds the scatter
 * tables kept on the device, if any, until it is released). Where a leaf or
 * destination has MTC_LEAF_PINNED, the plan looks it up as a plain submit
 * does (holding the block, busy until the copy is over); when a host leaf
 * is found to lie in pinned memory, where it lies decides its direct
 * chunk, and the plan is laid out afresh as a plain submit would (so a
 * prepared copy of pinned leaves saves the checks, not the layout). The
 * same when the pinned pool's limit (mtc_set_pinned_limit) changed the
 * largest chunk since the prepared copy was made. Destinations between two
 * GPUs take the peer path (no destination blocks are named; see
 * mtc_plan_set_destination_blocks): name them on a plan of
 * mtc_prepared_plan for the one-kernel path.
 *
 * Errors, with no plan made (*out_plan NULL) and mtc_last_error() saying
 * why: MTC_ERR_INVALID_ARGUMENT for NULL prepared, leaves (count > 0) or
 * out_plan, a count other than the prepared copy's, a field other than the
 * address that differs, an address that fails its check, overlapping
 * destinations (each naming the leaf: "leaf 3: ..."); and
 * whatever mtc_plan_submit returns when it fails at once (the plan is then
 * released here, not returned; its message begins "leaf N: " when the
 * plan blamed leaf N, since mtc_plan_error_leaf cannot be asked). A copy that fails later is reported by
 * poll and wait, as for any plan.
 *
 * Threads: a prepared copy is read-only once made; any number of threads
 * may call mtc_prepared_submit, mtc_prepared_plan and
 * mtc_prepared_leaf_count on one prepared copy at once. Undefined: a
 * released prepared copy, a release that may overlap such a call (as for
 * mtc_plan_release), either array holding fewer than count entries, and
 * the rules of mtc_plan_add_leaf for the memory the leaves describe. */
MTC_API mtc_status mtc_prepared_submit(mtc_prepared *prepared,
                                       const mtc_leaf *leaves,
                                       const mtc_leaf *destinations,
                                       uint64_t count, mtc_plan **out_plan);

/* As mtc_prepared_submit, but the plan is not submitted: it is written to
 * *out_plan still being built and laid out, so that the caller may set its
 * streams (mtc_plan_set_stream) and, for a copy into existing memory, its
 * destination blocks (mtc_plan_set_destination_blocks), then submit it
 * (mtc_plan_submit, which skips the planner and the checks made here as
 * mtc_prepared_submit does). Its leaves and their layouts are fixed:
 * mtc_plan_add_leaf(s), mtc_plan_add_leaves_into and mtc_plan_set_leaf_layout
 * on it are MTC_ERR_INVALID_STATE. Errors as mtc_prepared_submit (those of
 * the overlap check come from mtc_plan_submit here). Threads and undefined
 * behaviour: as mtc_prepared_submit. */
MTC_API mtc_status mtc_prepared_plan(mtc_prepared *prepared,
                                     const mtc_leaf *leaves,
                                     const mtc_leaf *destinations,
                                     uint64_t count, mtc_plan **out_plan);

/* The number of leaves of the prepared copy (the count its calls take). 0
 * for NULL. */
MTC_API uint64_t mtc_prepared_leaf_count(const mtc_prepared *prepared);

/* Releases the prepared copy. NULL is ignored. Plans made from it are the
 * caller's and live on: they complete, and are polled, waited for, read
 * and released as before. Undefined: releasing it twice, any call on it
 * afterwards, and a release that may overlap another call on it in
 * another thread. */
MTC_API void mtc_prepared_release(mtc_prepared *prepared);

#endif /* MTC_PUBLIC_PREPARED_H */
