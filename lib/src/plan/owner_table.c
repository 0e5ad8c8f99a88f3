/* owner_table.c — the ledger of owners and refs (see owner_table.h). One
 * lock guards it all: calls are a handful of map operations, tens of
 * thousands a second at most, so a finer scheme would buy nothing. */
#include "plan/owner_table.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/id_map.h"

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static mtc_id_map owners; /* id -> mtc_owner_record */
static mtc_id_map refs;   /* ref -> mtc_ref_entry */
/* Owners and refs are numbered apart (one can never pass for the other),
 * each under a key of this process's (base/id_map.h), so that an id kept
 * from another process is unknown here. */
static mtc_id_space owner_ids, ref_ids;
static mtc_owner_record *parcels;
static uint64_t parcel_count;

void mtc_owners_lock(void) {
  pthread_mutex_lock(&ledger_lock);
  if (owner_ids.next == 0) {
    mtc_id_space_init(&owner_ids, 0, mtc_id_random_key());
    mtc_id_space_init(&ref_ids, 1, mtc_id_random_key());
  }
}

void mtc_owners_unlock(void) { pthread_mutex_unlock(&ledger_lock); }

mtc_owner_record *mtc_owner_new_locked(uint32_t flags, mtc_owner sender) {
  mtc_owner_record *owner = calloc(1, sizeof *owner);
  if (owner == NULL) {
    mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
    return NULL;
  }
  owner->id = mtc_id_space_next(&owner_ids);
  owner->flags = flags;
  owner->sender = (flags & MTC_OWNER_PARCEL) ? sender : 0;
  if (owner->id == 0 || mtc_id_map_put(&owners, owner->id, owner) != 0) {
    mtc_error_set(MTC_ERR_OUT_OF_MEMORY, owner->id == 0 ? "owner ids are used up (2^51)"
                                                        : "out of host memory");
    free(owner);
    return NULL;
  }
  if (flags & MTC_OWNER_PARCEL) {
    owner->parcel_next = parcels;
    if (parcels != NULL) parcels->parcel_prev = owner;
    parcels = owner;
    parcel_count++;
  }
  return owner;
}

mtc_owner_record *mtc_owner_find_locked(mtc_owner id) {
  return mtc_id_map_get(&owners, id);
}

mtc_owner_record *mtc_owner_expect_locked(mtc_owner id, const char *what) {
  mtc_owner_record *owner = mtc_id_map_get(&owners, id);
  if (owner != NULL) return owner;
  if (!mtc_id_space_issued(&owner_ids, id)) {
    mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                  "%s %llu is unknown (no owner of this process has that number)",
                  what, (unsigned long long)id);
  } else {
    mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                  "%s %llu has ended (released, taken, or its thread exited)",
                  what, (unsigned long long)id);
  }
  return NULL;
}

static void leave_thread_locked(mtc_owner_record *owner) {
  mtc_thread_owners *list = owner->thread;
  if (list == NULL) return;
  for (size_t i = 0; i < list->count; i++) {
    if (list->owners[i] == owner) {
      list->owners[i] = list->owners[--list->count];
      break;
    }
  }
  owner->thread = NULL;
}

mtc_ref_entry *mtc_owner_end_locked(mtc_owner_record *owner) {
  mtc_id_map_remove(&owners, owner->id);
  leave_thread_locked(owner);
  if (owner->flags & MTC_OWNER_PARCEL) {
    if (owner->parcel_prev != NULL) owner->parcel_prev->parcel_next = owner->parcel_next;
    else parcels = owner->parcel_next;
    if (owner->parcel_next != NULL) owner->parcel_next->parcel_prev = owner->parcel_prev;
    parcel_count--;
  }
  mtc_ref_entry *held = owner->refs;
  for (mtc_ref_entry *e = held; e != NULL; e = e->next) {
    mtc_id_map_remove(&refs, e->ref);
    e->owner = NULL;
  }
  free(owner);
  return held;
}

mtc_owner_record *mtc_parcels_locked(void) { return parcels; }

uint64_t mtc_parcel_count_locked(void) { return parcel_count; }

/* Links entry at the head of owner's refs. */
static void link_locked(mtc_owner_record *owner, mtc_ref_entry *entry) {
  entry->owner = owner;
  entry->prev = NULL;
  entry->next = owner->refs;
  if (owner->refs != NULL) owner->refs->prev = entry;
  owner->refs = entry;
  owner->ref_count++;
}

static void unlink_locked(mtc_ref_entry *entry) {
  mtc_owner_record *owner = entry->owner;
  if (entry->prev != NULL) entry->prev->next = entry->next;
  else owner->refs = entry->next;
  if (entry->next != NULL) entry->next->prev = entry->prev;
  entry->prev = entry->next = NULL;
  entry->owner = NULL;
  owner->ref_count--;
}

mtc_status mtc_ref_file_locked(mtc_owner_record *owner, mtc_ref_entry *entry) {
  entry->ref = mtc_id_space_next(&ref_ids);
  if (entry->ref == 0) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "ref ids are used up (2^51)");
  }
  if (mtc_id_map_put(&refs, entry->ref, entry) != 0) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  link_locked(owner, entry);
  return MTC_OK;
}

mtc_ref_entry *mtc_ref_find_locked(mtc_ref ref) {
  return mtc_id_map_get(&refs, ref);
}

void mtc_ref_unfile_locked(mtc_ref_entry *entry) {
  mtc_id_map_remove(&refs, entry->ref);
  unlink_locked(entry);
}

void mtc_ref_hand_over_locked(mtc_ref_entry *entry, mtc_owner_record *to) {
  unlink_locked(entry);
  link_locked(to, entry);
}

mtc_ref_entry *mtc_ref_entries_join(mtc_ref_entry *entries,
                                    mtc_ref_entry *more) {
  if (more == NULL) return entries;
  mtc_ref_entry *last = more;
  while (last->next != NULL) last = last->next;
  last->next = entries;
  return more;
}

static void release_object(const mtc_ref_entry *entry) {
  switch (entry->kind) {
    case MTC_REF_BLOCK:
      mtc_block_release(entry->object);
      break;
    case MTC_REF_PLAN:
      mtc_plan_release(entry->object);
      break;
    case MTC_REF_EVENT:
      mtc_event_release(entry->object);
      break;
  }
}

void mtc_ref_entries_release(mtc_ref_entry *entries, int stop_reading) {
  if (stop_reading) {
    /* All of them first, so no copy goes on reading while an earlier
     * plan's device work is waited for. A read in progress is not waited
     * for here: the plan's release waits for its submission anyway. */
    for (mtc_ref_entry *e = entries; e != NULL; e = e->next) {
      if (e->kind == MTC_REF_PLAN) (void)mtc_plan_stop_reading(e->object, 0);
    }
  }
  while (entries != NULL) {
    mtc_ref_entry *next = entries->next;
    release_object(entries);
    free(entries);
    entries = next;
  }
}
