/* owner_refs.c — refs (mtc/owner.h): an owner's references taken, adopted,
 * released one by one, and moved to another owner. The ledger is
 * owner_table.c's; objects are released after its lock is let go. */
#include <stdlib.h>

#include "base/error.h"
#include "plan/owner_table.h"

/* Files object under owner as a new ref; 0 (last error set) when the owner
 * is unknown or memory runs out, the object untouched. */
static mtc_ref file(mtc_owner id, uint32_t kind, void *object) {
  mtc_ref_entry *entry = calloc(1, sizeof *entry);
  if (entry == NULL) {
    mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
    return 0;
  }
  entry->kind = kind;
  entry->object = object;
  mtc_owners_lock();
  mtc_owner_record *owner = mtc_owner_expect_locked(id, "owner");
  mtc_ref ref = 0;
  if (owner != NULL && mtc_ref_file_locked(owner, entry) == MTC_OK) {
    ref = entry->ref;
  }
  mtc_owners_unlock();
  if (ref == 0) free(entry);
  return ref;
}

MTC_API mtc_ref mtc_ref_retain_block(mtc_owner owner, mtc_block *block) {
  if (block == NULL) {
    mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                  "mtc_ref_retain_block: block must not be NULL");
    return 0;
  }
  /* Retained before it is filed: from then on another thread may release
   * the ref. */
  mtc_block_retain(block);
  mtc_ref ref = file(owner, MTC_REF_BLOCK, block);
  if (ref == 0) mtc_block_release(block);
  return ref;
}

MTC_API mtc_ref mtc_ref_adopt(mtc_owner owner, uint32_t kind, void *object) {
  if (kind != MTC_REF_BLOCK && kind != MTC_REF_PLAN && kind != MTC_REF_EVENT) {
    mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                  "mtc_ref_adopt: kind %u is not MTC_REF_BLOCK, MTC_REF_PLAN "
                  "or MTC_REF_EVENT",
                  (unsigned)kind);
    return 0;
  }
  if (object == NULL) {
    mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                  "mtc_ref_adopt: object must not be NULL");
    return 0;
  }
  return file(owner, kind, object);
}

MTC_API void mtc_ref_release(mtc_ref ref) {
  mtc_owners_lock();
  mtc_ref_entry *entry = mtc_ref_find_locked(ref);
  if (entry != NULL) mtc_ref_unfile_locked(entry);
  mtc_owners_unlock();
  /* Unknown: released already, moved, or its owner ended. */
  if (entry != NULL) mtc_ref_entries_release(entry, 0);
}

MTC_API void mtc_ref_release_callback(void *bytes, void *ref) {
  (void)bytes;
  mtc_ref_release((mtc_ref)(uintptr_t)ref);
}

/* Why refs[index] cannot move: the message names it, and whose it is. */
static mtc_status refuse(const mtc_ref *refs, uint32_t index, mtc_owner from,
                         const mtc_ref_entry *entry) {
  unsigned long long ref = (unsigned long long)refs[index];
  if (entry != NULL && entry->marked) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_ref_move: ref %llu (index %u) is given twice",
                         ref, (unsigned)index);
  }
  if (entry != NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_ref_move: ref %llu (index %u) is not held by "
                         "owner %llu but by owner %llu",
                         ref, (unsigned)index, (unsigned long long)from,
                         (unsigned long long)entry->owner->id);
  }
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "mtc_ref_move: ref %llu (index %u) is not held by "
                       "owner %llu (released, moved, or never made)",
                       ref, (unsigned)index, (unsigned long long)from);
}

MTC_API mtc_status mtc_ref_move(mtc_owner from, mtc_owner to, mtc_ref *refs,
                                uint32_t count) {
  if (refs == NULL && count > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_ref_move: refs must not be NULL");
  }
  mtc_owners_lock();
  mtc_status status = MTC_OK;
  mtc_owner_record *source = mtc_owner_expect_locked(from, "from owner");
  mtc_owner_record *target = source ? mtc_owner_expect_locked(to, "to owner") : NULL;
  if (target == NULL) status = MTC_ERR_INVALID_ARGUMENT;
  /* Every ref checked (and marked, which finds one given twice) before
   * any moves: all or nothing. */
  uint32_t checked = 0;
  for (; status == MTC_OK && checked < count; checked++) {
    mtc_ref_entry *entry = mtc_ref_find_locked(refs[checked]);
    if (entry == NULL || entry->owner != source || entry->marked) {
      status = refuse(refs, checked, from, entry);
      break;
    }
    entry->marked = 1;
  }
  for (uint32_t i = 0; i < checked; i++) {
    mtc_ref_entry *entry = mtc_ref_find_locked(refs[i]);
    entry->marked = 0;
    if (status != MTC_OK) continue;
    /* Unfiled then filed: the map never grows, so this cannot fail. */
    mtc_ref_unfile_locked(entry);
    (void)mtc_ref_file_locked(target, entry);
    refs[i] = entry->ref;
  }
  mtc_owners_unlock();
  return status;
}
