/* owner.c — owners (mtc/owner.h): create, release, the thread-exit release
 * of MTC_OWNER_THREAD owners, and parcels described, taken or dropped. The
 * ledger is owner_table.c's; what an ended owner held is released here,
 * after its lock is let go. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/keep_loaded.h"
#include "plan/owner_table.h"
#include "run/trace_file.h"

/* Owners that ended and whose references are still being released (a plan
 * waits for its copy): mtc_owner_alive says 1 until that is over, so that a
 * 0 means everything the owner held is back. Under the owners' lock. */
static mtc_owner *ending;
static size_t ending_count, ending_capacity;

/* Notes id as ending; lock held. On no memory, alive turns 0 a little early. */
static void ending_add_locked(mtc_owner id) {
  if (ending_count == ending_capacity) {
    size_t capacity = ending_capacity ? ending_capacity * 2 : 8;
    mtc_owner *grown = realloc(ending, capacity * sizeof *grown);
    if (grown == NULL) return;
    ending = grown;
    ending_capacity = capacity;
  }
  ending[ending_count++] = id;
}

static int ending_has_locked(mtc_owner id) {
  for (size_t i = 0; i < ending_count; i++) {
    if (ending[i] == id) return 1;
  }
  return 0;
}

/* What id held is released: it has ended for good. */
static void ending_done(mtc_owner id) {
  mtc_owners_lock();
  for (size_t i = 0; i < ending_count; i++) {
    if (ending[i] == id) {
      ending[i] = ending[--ending_count];
      break;
    }
  }
  mtc_owners_unlock();
}

static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static int thread_key_ready;

/* The thread is exiting: its owners end, and what they held is released
 * (a Deno worker terminated without an event ends this way). An owner
 * released explicitly before has left the list already. */
static void release_thread_owners(void *value) {
  mtc_thread_owners *list = value;
  mtc_ref_entry *held = NULL;
  size_t count = list->count;
  mtc_owner *ids = calloc(count ? count : 1, sizeof *ids);
  mtc_owners_lock();
  for (size_t i = 0; list->count > 0; i++) {
    mtc_owner_record *owner = list->owners[--list->count];
    owner->thread = NULL;
    if (ids != NULL) {
      ids[i] = owner->id;
      ending_add_locked(owner->id);
    }
    held = mtc_ref_entries_join(held, mtc_owner_end_locked(owner));
  }
  mtc_owners_unlock();
  free(list->owners);
  free(list);
  mtc_ref_entries_release(held, 1);
  for (size_t i = 0; ids != NULL && i < count; i++) ending_done(ids[i]);
  free(ids);
}

static void make_thread_key(void) {
  /* The destructor's code must stay mapped for as long as threads run,
   * even if a runtime dlclose()s libmtc. */
  mtc_keep_loaded();
  thread_key_ready = pthread_key_create(&thread_key, release_thread_owners) == 0;
}

/* The calling thread's list, made on first use; NULL when it cannot be. */
static mtc_thread_owners *this_thread_owners(void) {
  pthread_once(&thread_key_once, make_thread_key);
  if (!thread_key_ready) return NULL;
  mtc_thread_owners *list = pthread_getspecific(thread_key);
  if (list != NULL) return list;
  list = calloc(1, sizeof *list);
  if (list == NULL) return NULL;
  if (pthread_setspecific(thread_key, list) != 0) {
    free(list);
    return NULL;
  }
  return list;
}

/* Lists owner as one of the thread's. Lock held. */
static mtc_status join_thread_locked(mtc_thread_owners *list,
                                     mtc_owner_record *owner) {
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? list->capacity * 2 : 4;
    mtc_owner_record **grown = realloc(list->owners, capacity * sizeof *grown);
    if (grown == NULL) {
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    list->owners = grown;
    list->capacity = capacity;
  }
  list->owners[list->count++] = owner;
  owner->thread = list;
  return MTC_OK;
}

MTC_API mtc_status mtc_owner_create(uint32_t flags, mtc_owner sender,
                                    mtc_owner *out) {
  if (out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_owner_create: out must not be NULL");
  }
  *out = 0;
  if ((flags & ~(uint32_t)(MTC_OWNER_THREAD | MTC_OWNER_PARCEL)) != 0 ||
      flags == (MTC_OWNER_THREAD | MTC_OWNER_PARCEL)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_owner_create: flags 0x%x are not 0, "
                         "MTC_OWNER_THREAD or MTC_OWNER_PARCEL",
                         (unsigned)flags);
  }
  mtc_thread_owners *list = NULL;
  if (flags & MTC_OWNER_THREAD) {
    list = this_thread_owners();
    if (list == NULL) {
      return mtc_error_set(MTC_ERR_OUT_OF_MEMORY,
                           "mtc_owner_create: no thread-local list for the "
                           "thread's owners");
    }
  }
  mtc_owners_lock();
  mtc_status status = MTC_OK;
  /* A parcel's sender must exist when it sends; the parcel outlives it. */
  if ((flags & MTC_OWNER_PARCEL) && sender != 0 &&
      mtc_owner_expect_locked(sender, "sender") == NULL) {
    status = MTC_ERR_INVALID_ARGUMENT;
  }
  mtc_owner_record *owner = NULL;
  if (status == MTC_OK) {
    owner = mtc_owner_new_locked(flags, sender);
    if (owner == NULL) status = MTC_ERR_OUT_OF_MEMORY;
  }
  if (owner != NULL && list != NULL) {
    status = join_thread_locked(list, owner);
    if (status != MTC_OK) {
      (void)mtc_owner_end_locked(owner); /* holds nothing yet */
      owner = NULL;
    }
  }
  if (owner != NULL) *out = owner->id;
  mtc_owners_unlock();
  return status;
}

MTC_API mtc_status mtc_owner_release(mtc_owner id) {
  mtc_owners_lock();
  mtc_owner_record *owner = mtc_owner_expect_locked(id, "owner");
  if (owner != NULL) ending_add_locked(id);
  mtc_ref_entry *held = owner ? mtc_owner_end_locked(owner) : NULL;
  mtc_owners_unlock();
  if (owner == NULL) return MTC_ERR_INVALID_ARGUMENT;
  mtc_ref_entries_release(held, 1);
  ending_done(id);
  return MTC_OK;
}

MTC_API int32_t mtc_owner_alive(mtc_owner id) {
  mtc_owners_lock();
  int32_t alive = mtc_owner_find_locked(id) != NULL || ending_has_locked(id);
  mtc_owners_unlock();
  return alive;
}

MTC_API int64_t mtc_owner_ref_count(mtc_owner id) {
  mtc_owners_lock();
  mtc_owner_record *owner = mtc_owner_find_locked(id);
  int64_t count = owner ? (int64_t)owner->ref_count : -1;
  mtc_owners_unlock();
  return count;
}

MTC_API uint64_t mtc_parcels_live(void) {
  mtc_owners_lock();
  uint64_t count = mtc_parcel_count_locked();
  mtc_owners_unlock();
  return count;
}

MTC_API mtc_status mtc_owner_take(mtc_owner parcel, mtc_owner to) {
  mtc_owners_lock();
  mtc_status status = MTC_OK;
  mtc_owner_record *from = mtc_owner_find_locked(parcel);
  mtc_owner_record *into = NULL;
  if (from == NULL || !(from->flags & MTC_OWNER_PARCEL)) {
    status = mtc_error_set(MTC_ERR_INVALID_STATE,
                           "mtc_owner_take: %llu is no parcel to take (taken "
                           "already or dropped, or not a parcel)",
                           (unsigned long long)parcel);
  } else if (parcel == to) {
    status = mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "mtc_owner_take: parcel %llu cannot take itself",
                           (unsigned long long)parcel);
  } else if ((into = mtc_owner_expect_locked(to, "to owner")) == NULL) {
    status = MTC_ERR_INVALID_ARGUMENT;
  }
  if (status == MTC_OK) {
    while (from->refs != NULL) mtc_ref_hand_over_locked(from->refs, into);
    (void)mtc_owner_end_locked(from); /* holds nothing now */
  }
  mtc_owners_unlock();
  return status;
}

MTC_API uint64_t mtc_owner_drop_parcels(mtc_owner sender) {
  if (sender == 0) return 0; /* parcels of no sender go only one by one */
  mtc_ref_entry *held = NULL;
  uint64_t dropped = 0;
  mtc_owners_lock();
  mtc_owner_record *parcel = mtc_parcels_locked();
  while (parcel != NULL) {
    mtc_owner_record *next = parcel->parcel_next;
    if (parcel->sender == sender) {
      held = mtc_ref_entries_join(held, mtc_owner_end_locked(parcel));
      dropped++;
    }
    parcel = next;
  }
  mtc_owners_unlock();
  mtc_ref_entries_release(held, 1);
  return dropped;
}

/* The live parcel `id`; else NULL with the last error set:
 * MTC_ERR_INVALID_STATE when no live owner has the number (taken, dropped,
 * never made in this process), MTC_ERR_INVALID_ARGUMENT for an owner that
 * is no parcel. Lock held. */
static mtc_owner_record *parcel_locked(mtc_owner id, const char *call,
                                       mtc_status *status) {
  mtc_owner_record *owner = mtc_owner_find_locked(id);
  if (owner == NULL) {
    *status = mtc_error_set(MTC_ERR_INVALID_STATE,
                            "%s: no parcel %llu here (taken already, "
                            "dropped, or not made by this process)",
                            call, (unsigned long long)id);
  } else if (!(owner->flags & MTC_OWNER_PARCEL)) {
    const char *kind = (owner->flags & MTC_OWNER_THREAD) ? "a thread's owner" : "an owner";
    *status = mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "%s: owner %llu is no parcel (%s)",
                            call, (unsigned long long)id, kind);
    owner = NULL;
  } else {
    *status = MTC_OK;
  }
  return owner;
}

/* The parcel's last ref: the first it was given (refs are linked newest
 * first). */
static mtc_ref_entry *oldest_ref(const mtc_owner_record *parcel) {
  mtc_ref_entry *e = parcel->refs;
  while (e != NULL && e->next != NULL) e = e->next;
  return e;
}

static void describe(const mtc_ref_entry *e, mtc_parcel_entry *out) {
  memset(out, 0, sizeof *out);
  out->ref = e->ref;
  out->object = (uint64_t)(uintptr_t)e->object;
  out->kind = e->kind;
  out->device = MTC_DEVICE_CPU;
  if (e->kind != MTC_REF_BLOCK) return;
  mtc_block_info info = {.struct_size = sizeof info};
  if (mtc_block_get_info(e->object, &info) != MTC_OK) return;
  out->address = info.address;
  out->bytes = info.bytes;
  out->device = info.device;
  out->pinned = info.pinned;
}

MTC_API mtc_status mtc_parcel_describe(mtc_owner parcel, mtc_parcel_entry *out,
                                       uint32_t capacity, uint32_t *count) {
  if (count == NULL || (out == NULL && capacity > 0)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_parcel_describe: count must not be NULL, nor "
                         "out when capacity > 0");
  }
  *count = 0;
  mtc_status status;
  mtc_owners_lock();
  mtc_owner_record *owner = parcel_locked(parcel, "mtc_parcel_describe", &status);
  if (owner != NULL && owner->ref_count > UINT32_MAX) {
    status = mtc_error_set(MTC_ERR_INVALID_STATE,
                           "mtc_parcel_describe: parcel %llu holds more than "
                           "2^32 - 1 refs",
                           (unsigned long long)parcel);
    owner = NULL;
  }
  if (owner != NULL) {
    uint32_t i = 0;
    for (mtc_ref_entry *e = oldest_ref(owner); e != NULL && i < capacity; e = e->prev) {
      describe(e, &out[i++]);
    }
    *count = (uint32_t)owner->ref_count;
  }
  mtc_owners_unlock();
  return status;
}

/* 1 when parcel holds exactly refs[0..count), in the order it was given
 * them. Lock held. */
static int holds_exactly(const mtc_owner_record *parcel, const mtc_ref *refs,
                         uint32_t count) {
  if (parcel->ref_count != count) return 0;
  uint32_t i = 0;
  for (mtc_ref_entry *e = oldest_ref(parcel); e != NULL; e = e->prev) {
    if (refs[i++] != e->ref) return 0;
  }
  return 1;
}

MTC_API mtc_status mtc_parcel_take(mtc_owner parcel, mtc_owner to,
                                   const mtc_ref *refs, uint32_t count) {
  uint64_t begin = mtc_trace_file_now();
  if (refs == NULL && count > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_parcel_take: refs must not be NULL");
  }
  mtc_status status;
  mtc_owners_lock();
  mtc_owner_record *from = parcel_locked(parcel, "mtc_parcel_take", &status);
  mtc_owner_record *into = NULL;
  if (from != NULL && parcel == to) {
    status = mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "mtc_parcel_take: parcel %llu cannot take itself",
                           (unsigned long long)parcel);
  } else if (from != NULL && (into = mtc_owner_expect_locked(to, "to owner")) == NULL) {
    status = MTC_ERR_INVALID_ARGUMENT;
  } else if (from != NULL && !holds_exactly(from, refs, count)) {
    status = mtc_error_set(MTC_ERR_INVALID_STATE,
                           "mtc_parcel_take: parcel %llu does not hold "
                           "exactly the %u refs given (changed since it "
                           "was described)",
                           (unsigned long long)parcel, (unsigned)count);
  }
  if (status == MTC_OK) {
    while (from->refs != NULL) mtc_ref_hand_over_locked(from->refs, into);
    (void)mtc_owner_end_locked(from); /* holds nothing now */
  }
  mtc_owners_unlock();
  if (status == MTC_OK) mtc_trace_file_span("take parcel", "take", count, 0, begin);
  return status;
}

MTC_API mtc_status mtc_parcel_drop(mtc_owner parcel) {
  mtc_status status;
  mtc_owners_lock();
  mtc_owner_record *owner = parcel_locked(parcel, "mtc_parcel_drop", &status);
  if (owner != NULL) ending_add_locked(parcel);
  mtc_ref_entry *held = owner ? mtc_owner_end_locked(owner) : NULL;
  mtc_owners_unlock();
  if (owner == NULL) return status;
  mtc_ref_entries_release(held, 1);
  ending_done(parcel);
  return MTC_OK;
}
