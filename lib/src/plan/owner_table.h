/* owner_table.h — the ledger behind mtc/owner.h: every live owner and every
 * ref, found by number, under one lock. plan/owner.c (owners, threads,
 * parcels) and plan/owner_refs.c (refs) work on it; what a ref holds is
 * released only after the lock is let go, since a plan's release waits for
 * its device work. */
#ifndef MTC_PLAN_OWNER_TABLE_H
#define MTC_PLAN_OWNER_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "mtc.h"

typedef struct mtc_owner_record mtc_owner_record;

/* One reference an owner holds. */
typedef struct mtc_ref_entry {
  mtc_ref ref;
  mtc_owner_record *owner; /* NULL once taken out of the ledger */
  uint32_t kind;           /* mtc_ref_kind */
  void *object;
  struct mtc_ref_entry *prev, *next; /* the owner's refs; a released batch */
  int marked; /* mtc_ref_move: seen once in this call */
} mtc_ref_entry;

/* The owners a thread created with MTC_OWNER_THREAD, released when it
 * exits. Changed only under the ledger's lock. */
typedef struct mtc_thread_owners {
  mtc_owner_record **owners;
  size_t count, capacity;
} mtc_thread_owners;

struct mtc_owner_record {
  mtc_owner id;
  uint32_t flags;
  mtc_owner sender; /* a parcel's sender, else 0 */
  mtc_ref_entry *refs;
  uint64_t ref_count;
  mtc_thread_owners *thread; /* MTC_OWNER_THREAD: its thread's list */
  mtc_owner_record *parcel_prev, *parcel_next; /* parcels only */
};

void mtc_owners_lock(void);
void mtc_owners_unlock(void);

/* A new owner (not yet on any thread's list), or NULL with the last error
 * set. Lock held. */
mtc_owner_record *mtc_owner_new_locked(uint32_t flags, mtc_owner sender);

/* The live owner `id`, or NULL. Lock held. */
mtc_owner_record *mtc_owner_find_locked(mtc_owner id);

/* The live owner `id`; else NULL, with the last error saying whether it
 * ended or never was (what = the caller's name for it: "owner", "to owner"...).
 * Lock held. */
mtc_owner_record *mtc_owner_expect_locked(mtc_owner id, const char *what);

/* Ends the owner: it leaves the ledger (and its thread's list), its refs
 * become unknown, and the record is freed. Returns its refs, to release
 * once the lock is let go. Lock held. */
mtc_ref_entry *mtc_owner_end_locked(mtc_owner_record *owner);

/* The parcels not taken, newest first (parcel_next). Lock held. */
mtc_owner_record *mtc_parcels_locked(void);
uint64_t mtc_parcel_count_locked(void);

/* Gives entry (its object set) a new ref number and files it under owner.
 * MTC_OK, or MTC_ERR_OUT_OF_MEMORY with the last error set. Lock held. */
mtc_status mtc_ref_file_locked(mtc_owner_record *owner, mtc_ref_entry *entry);

/* The entry behind ref, or NULL. Lock held. */
mtc_ref_entry *mtc_ref_find_locked(mtc_ref ref);

/* Takes entry out of the ledger (its ref becomes unknown). Lock held. */
void mtc_ref_unfile_locked(mtc_ref_entry *entry);

/* Moves entry to owner `to`, keeping its number. Lock held. */
void mtc_ref_hand_over_locked(mtc_ref_entry *entry, mtc_owner_record *to);

/* Releases each entry's object as its kind is and frees the entries (a list
 * through next). stop_reading: plans stop reading host memory first (their
 * owner is going, and perhaps the memory with it). Lock not held. */
void mtc_ref_entries_release(mtc_ref_entry *entries, int stop_reading);

/* Prepends list `more` to list `entries` (next only); returns the head. */
mtc_ref_entry *mtc_ref_entries_join(mtc_ref_entry *entries,
                                    mtc_ref_entry *more);

#endif
