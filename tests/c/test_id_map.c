/* test_id_map.c — base/id_map against a plain array of what it should
 * hold, over a long random run of puts and removes (removal shifts entries
 * back, which is where an open-addressing map goes wrong). */
#include "base/id_map.h"
#include "check.h"

#define SUITE "test_id_map"
enum { IDS = 5000, STEPS = 200000 };

static void *present[IDS + 1]; /* the value each id should map to, or NULL */

int main(void) {
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
