/* test_id_map.c — base/id_map against a plain array of what it should
 * hold, over a long random run of puts and removes (removal shifts entries
 * back, which is where an open-addressing map goes wrong); and id spaces:
 * never 0, below 2^53, never handed out twice, and another key's or kind's
 * ids not taken for the space's own. */
#include "base/id_map.h"
#include "check.h"

#define SUITE "test_id_map"
enum { IDS = 5000, STEPS = 200000 };

static void *present[IDS + 1]; /* the value each id should map to, or NULL */

static void test_id_spaces(void) {
  enum { COUNT = 100000 };
  mtc_id_space owners, refs, other_process;
  mtc_id_space_init(&owners, 0, 0x5A5A5A5A5A5Aull);
  mtc_id_space_init(&refs, 1, 0x5A5A5A5A5A5Aull); /* the same key: the kind still tells them apart */
  mtc_id_space_init(&other_process, 0, 0x5A5A5A5A5A5Aull ^ (1ull << 40));
  mtc_id_map seen = {0};
  int wrong = 0;
  for (int i = 0; i < COUNT; i++) {
    uint64_t id = mtc_id_space_next(&owners);
    uint64_t ref = mtc_id_space_next(&refs);
    uint64_t foreign = mtc_id_space_next(&other_process);
    wrong += (id >> 52) != 1 || (ref >> 52) != 1; /* the mark: never 0, below 2^53 */
    wrong += mtc_id_map_get(&seen, id) != NULL; /* never twice */
    wrong += mtc_id_map_put(&seen, id, &seen) != 0;
    wrong += !mtc_id_space_issued(&owners, id) || !mtc_id_space_issued(&refs, ref);
    wrong += mtc_id_space_issued(&owners, ref) || mtc_id_space_issued(&refs, id);
    wrong += mtc_id_space_issued(&owners, foreign) || mtc_id_space_issued(&other_process, id);
  }
  CHECK_EQ_U64(wrong, 0);
  CHECK_EQ_U64(seen.count, COUNT);
  /* Not yet handed out, or not an id at all. */
  mtc_id_space later = owners;
  uint64_t next = mtc_id_space_next(&later);
  CHECK(!mtc_id_space_issued(&owners, next) && mtc_id_space_issued(&later, next));
  CHECK(!mtc_id_space_issued(&owners, 0));
  CHECK(!mtc_id_space_issued(&owners, 1));
  CHECK(!mtc_id_space_issued(&owners, (uint64_t)1 << 50));
  CHECK(!mtc_id_space_issued(&later, next & ~(1ull << 52))); /* without its mark */
  CHECK(!mtc_id_space_issued(&owners, ~(uint64_t)0));
  /* Used up: 0 from then on. */
  mtc_id_space last;
  mtc_id_space_init(&last, 0, 123);
  last.next = MTC_ID_COUNTERS - 1;
  CHECK(mtc_id_space_next(&last) != 0);
  CHECK(mtc_id_space_next(&last) == 0);
  CHECK(mtc_id_space_next(&last) == 0);
  /* Two draws of a key differ (equal: a chance of 2^-64). */
  CHECK(mtc_id_random_key() != mtc_id_random_key());
  free(seen.keys);
  free(seen.values);
}

int main(void) {
  test_id_spaces();
  mtc_id_map map = {0};
  CHECK(mtc_id_map_get(&map, 1) == NULL);
  CHECK(mtc_id_map_remove(&map, 1) == NULL);
  uint64_t state = 0x9E3779B97F4A7C15ull, count = 0;
  int wrong = 0;
  for (int step = 0; step < STEPS; step++) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    /* Mostly the newer ids, as a ledger sees them, with old ones lingering. */
    uint64_t id = 1 + (state >> 20) % (step % 3 ? 600 : IDS);
    void *value = (void *)(uintptr_t)(id * 16);
    if (present[id] == NULL) {
      wrong += mtc_id_map_put(&map, id, value) != 0;
      present[id] = value;
      count++;
    } else {
      wrong += mtc_id_map_remove(&map, id) != present[id];
      present[id] = NULL;
      count--;
    }
    if (step % 997 == 0) {
      for (uint64_t k = 1; k <= IDS; k++) wrong += mtc_id_map_get(&map, k) != present[k];
    }
  }
  CHECK_EQ_U64(wrong, 0);
  CHECK_EQ_U64(map.count, count);
  CHECK(map.count * 2 <= map.capacity);
  free(map.keys);
  free(map.values);
  return check_summary(SUITE);
}
