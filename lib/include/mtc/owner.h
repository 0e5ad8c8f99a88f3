/* mtc/owner.h — owners: which thread holds which references, so that what a
 * thread held is given back when it ends, and results move between threads.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_OWNER_H
#define MTC_PUBLIC_OWNER_H

#ifndef MTC_H
#error "include mtc.h, not mtc/owner.h"
#endif

/* ---------------------------------------------------------------- owners */

/* An owner is a ledger of references (to blocks, plans and events), kept in
 * C so that nothing depends on the holder's heap: a runtime's worker can be
 * terminated without an event (Deno frees its heap at once), and what it
 * held is still released, exactly once. Three uses:
 *  - a thread's owner (MTC_OWNER_THREAD): released with everything in it
 *    when the thread that created it exits (a thread-local destructor), so a
 *    terminated worker's plans, blocks and pinned memory go back by
 *    themselves once its thread is gone;
 *  - a parcel (MTC_OWNER_PARCEL): references in transit from one thread to
 *    another; the receiver takes it whole (mtc_owner_take). A parcel
 *    belongs to no thread: it outlives its sender, and lasts until it is
 *    taken, released, dropped with its sender's other parcels, or the
 *    process exits;
 *  - any other grouping a C caller likes (flags 0), released explicitly.
 * Owners and refs are nonzero 64-bit ids below 2^53 (exact as JavaScript
 * numbers), never reused in a process, and numbered apart (a ref's id is
 * never an owner's). Each process numbers them under a random key of its
 * own, so an id kept from another process (a message saved to a file, a
 * forked or restarted worker) is unknown here but by a chance of N / 2^51
 * for N live ids: 4.4e-10 with a million. Every call here is safe from any
 * thread. */
typedef uint64_t mtc_owner;
typedef uint64_t mtc_ref;

/* What a ref holds; each is released the way its kind is. */
typedef enum mtc_ref_kind {
  MTC_REF_BLOCK = 1, /* mtc_block_release */
  MTC_REF_PLAN = 2,  /* mtc_plan_release (waits for the copy in flight) */
  MTC_REF_EVENT = 3  /* mtc_event_release */
} mtc_ref_kind;

enum {
  /* Released when the creating thread exits. */
  MTC_OWNER_THREAD = 1u << 0,
  /* In transit: `sender` names the owner that made it. */
  MTC_OWNER_PARCEL = 1u << 1
};

/* Creates an owner. flags: 0, MTC_OWNER_THREAD or MTC_OWNER_PARCEL (not
 * both); sender: for a parcel, the owner sending it (0 for none; else it
 * must be alive now), else ignored. Writes its id to *out (0 on failure).
 * MTC_ERR_INVALID_ARGUMENT for other flags or an unknown sender. A thread's
 * owner is released when the thread exits through pthread_exit or by
 * returning; a process that ends with exit() releases nothing (its memory
 * goes with it). */
MTC_API mtc_status mtc_owner_create(uint32_t flags, mtc_owner sender,
                                    mtc_owner *out);

/* Releases every reference the owner holds, each as its kind is (a plan
 * first stops reading host memory, then waits for its device work), and
 * ends the owner: its refs become unknown, and releasing one later is
 * ignored. An owner already ended, or never made: MTC_ERR_INVALID_ARGUMENT.
 * Undefined: a thread still using a plan, block or event of the owner's
 * through its pointer (a thread's own owner is released at its exit, when
 * it cannot). This ends any owner: for a parcel named by a message another
 * thread sent (untrusted), use mtc_parcel_drop, which ends parcels only. */
MTC_API mtc_status mtc_owner_release(mtc_owner owner);

/* 1 while the owner exists, 0 once it ended (released, taken, or its
 * thread exited) and what it held has been released: after a 0, its
 * plans are released and its blocks' references dropped. */
MTC_API int32_t mtc_owner_alive(mtc_owner owner);

/* How many references the owner holds; -1 once it ended. */
MTC_API int64_t mtc_owner_ref_count(mtc_owner owner);

/* Parcels not yet taken or released, for leak checks. */
MTC_API uint64_t mtc_parcels_live(void);

/* Takes a new reference to block (mtc_block_retain) for owner; returns its
 * ref, or 0 (message in mtc_last_error) for an unknown owner or a NULL
 * block, taking nothing. */
MTC_API mtc_ref mtc_ref_retain_block(mtc_owner owner, mtc_block *block);

/* Records a reference the caller already holds (a plan from
 * mtc_plan_create, a block from mtc_host_block_alloc or
 * mtc_device_block_alloc, an event) as the owner's, under kind; returns its
 * ref. On failure (an unknown owner, a bad kind, NULL) returns 0 and the
 * reference stays the caller's, untouched. */
MTC_API mtc_ref mtc_ref_adopt(mtc_owner owner, uint32_t kind, void *object);

/* Releases the reference behind ref, as its kind is, and forgets ref. A ref
 * that is unknown (released already, moved, or its owner ended) is
 * ignored, so a late release after an owner ended is harmless. */
MTC_API void mtc_ref_release(mtc_ref ref);

/* mtc_ref_release(ref) shaped as an external-memory deallocator, void
 * (*)(void *bytes, void *context), with the ref as context (Bun's
 * toArrayBuffer); bytes is ignored. */
MTC_API void mtc_ref_release_callback(void *bytes, void *ref);

/* Moves refs[0..count) from owner `from` to owner `to` (a parcel, say):
 * each gets a new ref, written back into refs[i], and the old one becomes
 * unknown, so a holder the sender forgot (a buffer's deallocator) releases
 * nothing. All or nothing: a ref `from` does not hold, given twice, or an
 * unknown owner is MTC_ERR_INVALID_ARGUMENT (the message names the index)
 * and moves none. */
MTC_API mtc_status mtc_ref_move(mtc_owner from, mtc_owner to, mtc_ref *refs,
                                uint32_t count);

/* Takes every reference of parcel into owner `to` and ends the parcel. The
 * refs keep their numbers: the message that carried them still names them.
 * A parcel taken, released or dropped already, or an owner that is not a
 * parcel: MTC_ERR_INVALID_STATE ("taken already or dropped"); `to` unknown
 * or the parcel itself: MTC_ERR_INVALID_ARGUMENT, taking nothing. A
 * receiver that must not trust the message naming the parcel uses
 * mtc_parcel_describe and mtc_parcel_take instead. */
MTC_API mtc_status mtc_owner_take(mtc_owner parcel, mtc_owner to);

/* Releases every parcel sent by `sender` and not taken (messages lost with
 * a closed port or a terminated worker); returns how many. `sender` may have
 * ended already; 0, and an id that no owner of this process ever had (one
 * of another process), drop nothing (a parcel of no sender is released only
 * by itself). */
MTC_API uint64_t mtc_owner_drop_parcels(mtc_owner sender);

/* ------------------------------------------------- parcels, as received */

/* A parcel's id reaches its receiver in a message that may have been
 * edited, kept from another process, or forged; these calls check the id
 * (a live parcel of this process) and say from C what each reference is,
 * so that a receiver takes no address or size from the message. */

/* One reference of a parcel, as mtc_parcel_describe says it is. */
typedef struct mtc_parcel_entry {
  mtc_ref ref;
  /* The mtc_block, mtc_plan or mtc_event, as an address. */
  uint64_t object;
  /* A block's first byte and usable bytes (mtc_block_get_info); 0 and 0
   * for a plan or an event. */
  uint64_t address;
  uint64_t bytes;
  uint32_t kind; /* mtc_ref_kind */
  /* A block's: MTC_DEVICE_CPU for host memory, else its CUDA device;
   * MTC_DEVICE_CPU for a plan or an event. */
  int32_t device;
  uint32_t pinned; /* 1: a block of page-locked host memory */
  uint32_t reserved0;
} mtc_parcel_entry;

/* Describes parcel's references without taking them: writes the first
 * min(capacity, held) of them to out[], in the order the parcel was given
 * them, and how many it holds to *count. MTC_ERR_INVALID_STATE when no live
 * owner has the id (taken, dropped, or not made by this process);
 * MTC_ERR_INVALID_ARGUMENT for an owner that is no parcel (a thread's). */
MTC_API mtc_status mtc_parcel_describe(mtc_owner parcel, mtc_parcel_entry *out,
                                       uint32_t capacity, uint32_t *count);

/* Takes parcel whole into owner `to` and ends it, if it holds exactly
 * refs[0..count) in the order mtc_parcel_describe lists them (what the
 * caller checked); the refs keep their numbers. All or nothing: a parcel
 * that holds other refs is MTC_ERR_INVALID_STATE and stays as it was; the
 * id errors are mtc_parcel_describe's; `to` unknown or the parcel itself:
 * MTC_ERR_INVALID_ARGUMENT. */
MTC_API mtc_status mtc_parcel_take(mtc_owner parcel, mtc_owner to,
                                   const mtc_ref *refs, uint32_t count);

/* Releases a parcel nobody will take, and what it holds, as
 * mtc_owner_release does; refuses every owner that is not a parcel
 * (MTC_ERR_INVALID_ARGUMENT: a thread's owner is never ended this way), and
 * an id no live owner has (MTC_ERR_INVALID_STATE: taken, dropped already,
 * or of another process). */
MTC_API mtc_status mtc_parcel_drop(mtc_owner parcel);

#endif /* MTC_PUBLIC_OWNER_H */
