/* test_parcels.c — parcels as a receiver sees them (mtc/owner.h, "parcels,
 * as received"), against the emulated driver (its path in argv[1]): ids
 * below 2^53, owners' and refs' apart, another process's unknown; a
 * parcel described from C (each block's address, bytes, device, pinned) in
 * the order it was given its refs; taken whole only as described; dropped
 * by a call that refuses every owner but a parcel, so that a thread's owner
 * never ends by a message's id. */
#include "check.h"
#include "helpers.h"

#define SUITE "test_parcels"

/* `id` as another process would have numbered it: another key (a counter
 * 2^40 away names nothing here). */
static uint64_t foreign(uint64_t id) { return id ^ ((uint64_t)1 << 40); }

static mtc_owner new_owner(uint32_t flags, mtc_owner sender) {
  mtc_owner owner = 0;
  CHECK_OK(mtc_owner_create(flags, sender, &owner));
  return owner;
}

static mtc_block *pinned_block(uint64_t bytes) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_host_block_alloc(0, bytes, &block));
  return block;
}

static mtc_block *device_block(uint64_t bytes) {
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(0, bytes, 0, &block));
  return block;
}

static void check_blocks(const mtc_stats *before) {
  mtc_stats now = checked_stats();
  CHECK_EQ_U64(now.blocks_live, before->blocks_live);
  CHECK_EQ_U64(now.pinned_held_bytes, before->pinned_held_bytes);
}

static void test_ids(void) {
  mtc_owner owner = new_owner(0, 0);
  mtc_block *block = pinned_block(4096);
  mtc_ref ref = mtc_ref_adopt(owner, MTC_REF_BLOCK, block);
  CHECK(owner < (1ull << 53) && ref < (1ull << 53) && owner != 0 && ref != 0);
  /* A ref's number is no owner's, and the reverse. */
  CHECK_STATUS(mtc_owner_release(ref), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "is unknown");
  CHECK(mtc_owner_alive(ref) == 0 && mtc_owner_ref_count(ref) == -1);
  mtc_ref_release(owner); /* no ref has that number: nothing */
  CHECK(mtc_owner_ref_count(owner) == 1);
  /* Another process's numbers: unknown, whatever they would name there. */
  CHECK_STATUS(mtc_owner_release(foreign(owner)), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "no owner of this process");
  mtc_ref_release(foreign(ref));
  CHECK(mtc_owner_ref_count(owner) == 1);
  CHECK_EQ_U64(mtc_owner_drop_parcels(foreign(owner)), 0);
  CHECK_OK(mtc_owner_release(owner));
}

static void test_describe(void) {
  mtc_stats before = checked_stats();
  mtc_owner sender = new_owner(0, 0);
  mtc_owner parcel = new_owner(MTC_OWNER_PARCEL, sender);
  mtc_block *blocks[2] = {pinned_block(5000), device_block(8192)};
  mtc_ref refs[2];
  for (int i = 0; i < 2; i++) {
    refs[i] = mtc_ref_retain_block(parcel, blocks[i]);
    CHECK(refs[i] != 0);
    mtc_block_release(blocks[i]); /* the parcel holds them now */
  }
  uint32_t count = 99;
  CHECK_OK(mtc_parcel_describe(parcel, NULL, 0, &count));
  CHECK_EQ_U64(count, 2);
  mtc_parcel_entry one[1];
  CHECK_OK(mtc_parcel_describe(parcel, one, 1, &count));
  CHECK_EQ_U64(count, 2);
  CHECK(one[0].ref == refs[0]); /* the first it was given comes first */
  mtc_parcel_entry got[3];
  memset(got, 0xAB, sizeof got);
  CHECK_OK(mtc_parcel_describe(parcel, got, 3, &count));
  CHECK_EQ_U64(count, 2);
  for (int i = 0; i < 2; i++) {
    mtc_block_info info = {.struct_size = sizeof info};
    CHECK_OK(mtc_block_get_info(blocks[i], &info));
    CHECK(got[i].ref == refs[i]);
    CHECK(got[i].object == (uint64_t)(uintptr_t)blocks[i]);
    CHECK(got[i].kind == MTC_REF_BLOCK);
    CHECK(got[i].address == info.address && got[i].address != 0);
    CHECK(got[i].bytes == info.bytes);
    CHECK(got[i].device == info.device);
    CHECK(got[i].pinned == info.pinned);
  }
  CHECK(got[0].pinned == 1 && got[0].device == MTC_DEVICE_CPU && got[0].bytes == 5000);
  CHECK(got[1].pinned == 0 && got[1].device == 0 && got[1].bytes == 8192);
  CHECK(got[2].ref == 0xABABABABABABABABull); /* past the count: untouched */
  CHECK_STATUS(mtc_parcel_describe(parcel, NULL, 1, &count), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_parcel_describe(parcel, got, 3, NULL), MTC_ERR_INVALID_ARGUMENT);

  /* Owners that are no parcel, and ids no live owner has. */
  mtc_owner thread = new_owner(MTC_OWNER_THREAD, 0);
  CHECK_STATUS(mtc_parcel_describe(thread, got, 3, &count), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "is no parcel (a thread's owner)");
  CHECK_EQ_U64(count, 0);
  CHECK_STATUS(mtc_parcel_describe(sender, got, 3, &count), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "is no parcel (an owner)");
  CHECK_STATUS(mtc_parcel_describe(foreign(parcel), got, 3, &count), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "not made by this process");
  CHECK_STATUS(mtc_parcel_describe(refs[0], got, 3, &count), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_parcel_describe(0, got, 3, &count), MTC_ERR_INVALID_STATE);

  /* Taken only as described: other refs, another order, fewer, more. */
  mtc_owner to = new_owner(0, 0);
  mtc_ref reversed[2] = {refs[1], refs[0]};
  mtc_ref more[3] = {refs[0], refs[1], refs[1]};
  mtc_ref forged[2] = {refs[0], foreign(refs[1])};
  CHECK_STATUS(mtc_parcel_take(parcel, to, reversed, 2), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "does not hold exactly the 2 refs given");
  CHECK_STATUS(mtc_parcel_take(parcel, to, refs, 1), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_parcel_take(parcel, to, more, 3), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_parcel_take(parcel, to, forged, 2), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_parcel_take(parcel, to, NULL, 2), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_parcel_take(parcel, foreign(to), refs, 2), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_parcel_take(parcel, parcel, refs, 2), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_parcel_take(thread, to, NULL, 0), MTC_ERR_INVALID_ARGUMENT);
  CHECK(mtc_owner_ref_count(parcel) == 2 && mtc_owner_ref_count(to) == 0);
  uint64_t parcels = mtc_parcels_live();
  CHECK_OK(mtc_parcel_take(parcel, to, refs, 2));
  CHECK_EQ_U64(mtc_parcels_live(), parcels - 1);
  CHECK(mtc_owner_alive(parcel) == 0 && mtc_owner_ref_count(to) == 2);
  CHECK_STATUS(mtc_parcel_take(parcel, to, refs, 2), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "taken already");
  CHECK_STATUS(mtc_parcel_describe(parcel, got, 3, &count), MTC_ERR_INVALID_STATE);
  mtc_ref_release(refs[0]); /* the numbers are the receiver's now */
  CHECK(mtc_owner_ref_count(to) == 1);

  /* An empty parcel: described as none, taken with none. */
  mtc_owner empty = new_owner(MTC_OWNER_PARCEL, sender);
  CHECK_OK(mtc_parcel_describe(empty, NULL, 0, &count));
  CHECK_EQ_U64(count, 0);
  CHECK_OK(mtc_parcel_take(empty, to, NULL, 0));
  CHECK_STATUS(mtc_parcel_take(empty, to, NULL, 0), MTC_ERR_INVALID_STATE);

  CHECK_OK(mtc_owner_release(to));
  CHECK_OK(mtc_owner_release(thread));
  CHECK_OK(mtc_owner_release(sender));
  check_blocks(&before);
}

static void test_drop(void) {
  mtc_stats before = checked_stats();
  uint64_t parcels = mtc_parcels_live();
  mtc_owner thread = new_owner(MTC_OWNER_THREAD, 0);
  mtc_owner plain = new_owner(0, 0);
  mtc_block *mine = pinned_block(4096);
  CHECK(mtc_ref_retain_block(thread, mine) != 0);
  CHECK(mtc_ref_retain_block(plain, mine) != 0);
  mtc_owner parcel = new_owner(MTC_OWNER_PARCEL, thread);
  CHECK(mtc_ref_retain_block(parcel, mine) != 0);
  mtc_block_release(mine);

  /* Never an owner that is no parcel: what they hold stays. */
  CHECK_STATUS(mtc_parcel_drop(thread), MTC_ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(mtc_last_error(), "is no parcel (a thread's owner)");
  CHECK_STATUS(mtc_parcel_drop(plain), MTC_ERR_INVALID_ARGUMENT);
  CHECK(mtc_owner_alive(thread) == 1 && mtc_owner_ref_count(thread) == 1);
  CHECK(mtc_owner_alive(plain) == 1 && mtc_owner_ref_count(plain) == 1);
  CHECK_STATUS(mtc_parcel_drop(foreign(parcel)), MTC_ERR_INVALID_STATE);
  CHECK_STATUS(mtc_parcel_drop(0), MTC_ERR_INVALID_STATE);
  CHECK_EQ_U64(mtc_parcels_live(), parcels + 1);

  CHECK_OK(mtc_parcel_drop(parcel));
  CHECK(mtc_owner_alive(parcel) == 0);
  CHECK_EQ_U64(mtc_parcels_live(), parcels);
  CHECK_STATUS(mtc_parcel_drop(parcel), MTC_ERR_INVALID_STATE);
  CHECK_CONTAINS(mtc_last_error(), "dropped");
  CHECK_OK(mtc_owner_release(plain));
  CHECK_EQ_U64(checked_stats().blocks_live, before.blocks_live + 1); /* the thread's */
  CHECK_OK(mtc_owner_release(thread));
  check_blocks(&before);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  if (driver == NULL) return 1;
  mtc_stats before = checked_stats();
  test_ids();
  test_describe();
  test_drop();
  check_blocks(&before);
  CHECK_EQ_U64(mtc_parcels_live(), 0);
  return check_summary(SUITE);
}
