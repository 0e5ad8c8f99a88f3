/* id_map.c — open addressing with linear probing, at most half full, and
 * removal by shifting later entries back (no tombstones, so a map that
 * sees ids come and go forever never degrades); and id spaces. */
#include "base/id_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Ids differ in their low bits mostly: Fibonacci hashing spreads them. */
static size_t home_of(const mtc_id_map *map, uint64_t id) {
  return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (map->capacity - 1);
}

static void place(mtc_id_map *map, uint64_t id, void *value) {
  size_t i = home_of(map, id);
  while (map->keys[i] != 0) i = (i + 1) & (map->capacity - 1);
  map->keys[i] = id;
  map->values[i] = value;
}

static int grow(mtc_id_map *map) {
  size_t capacity = map->capacity ? map->capacity * 2 : 64;
  uint64_t *keys = calloc(capacity, sizeof *keys);
  void **values = calloc(capacity, sizeof *values);
  if (keys == NULL || values == NULL) {
    free(keys);
    free(values);
    return -1;
  }
  mtc_id_map old = *map;
  map->keys = keys;
  map->values = values;
  map->capacity = capacity;
  for (size_t i = 0; i < old.capacity; i++) {
    if (old.keys[i] != 0) place(map, old.keys[i], old.values[i]);
  }
  free(old.keys);
  free(old.values);
  return 0;
}

static size_t slot_of(const mtc_id_map *map, uint64_t id) {
  if (map->capacity == 0 || id == 0) return SIZE_MAX;
  for (size_t i = home_of(map, id);; i = (i + 1) & (map->capacity - 1)) {
    if (map->keys[i] == id) return i;
    if (map->keys[i] == 0) return SIZE_MAX;
  }
}

void *mtc_id_map_get(const mtc_id_map *map, uint64_t id) {
  size_t i = slot_of(map, id);
  return i == SIZE_MAX ? NULL : map->values[i];
}

int mtc_id_map_put(mtc_id_map *map, uint64_t id, void *value) {
  if ((map->count + 1) * 2 > map->capacity && grow(map) != 0) return -1;
  place(map, id, value);
  map->count++;
  return 0;
}

void *mtc_id_map_remove(mtc_id_map *map, uint64_t id) {
  size_t hole = slot_of(map, id);
  if (hole == SIZE_MAX) return NULL;
  void *value = map->values[hole];
  size_t mask = map->capacity - 1;
  /* Pull back each later entry of the run whose home does not lie
   * (cyclically) between the hole and it, so every probe still finds it. */
  for (size_t i = (hole + 1) & mask; map->keys[i] != 0; i = (i + 1) & mask) {
    size_t home = home_of(map, map->keys[i]);
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      map->keys[hole] = map->keys[i];
      map->values[hole] = map->values[i];
      hole = i;
    }
  }
  map->keys[hole] = 0;
  map->values[hole] = NULL;
  map->count--;
  return value;
}

#define ID_MARK (1ull << 52)
#define ID_KIND (1ull << 51)
#define ID_LOW (MTC_ID_COUNTERS - 1)

void mtc_id_space_init(mtc_id_space *space, uint64_t kind, uint64_t key) {
  space->kind = kind ? ID_KIND : 0;
  space->key = key & ID_LOW;
  space->next = 1;
}

uint64_t mtc_id_space_next(mtc_id_space *space) {
  if (space->next == 0 || space->next >= MTC_ID_COUNTERS) return 0;
  uint64_t counter = space->next++;
  return ID_MARK | space->kind | (counter ^ space->key);
}

int mtc_id_space_issued(const mtc_id_space *space, uint64_t id) {
  if ((id & ~ID_LOW) != (ID_MARK | space->kind)) return 0;
  uint64_t counter = (id & ID_LOW) ^ space->key;
  return counter >= 1 && counter < space->next;
}

/* splitmix64's finalizer: every input bit moves every output bit. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mtc_id_random_key(void) {
  uint64_t key = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f != NULL) {
    size_t got = fread(&key, sizeof key, 1, f);
    fclose(f);
    if (got == 1) return key;
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uintptr_t here = (uintptr_t)&now;
  return mix((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^
         mix((uint64_t)getpid() << 32 ^ (uint64_t)here);
}
