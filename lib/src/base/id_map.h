/* id_map.h — a map from nonzero 64-bit ids to pointers: the owners' ledger
 * finds owners and refs by the numbers callers hold. Not thread-safe: the
 * user locks. */
#ifndef MTC_ID_MAP_H
#define MTC_ID_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct mtc_id_map {
  uint64_t *keys; /* 0: an empty slot */
  void **values;
  size_t capacity; /* a power of two, or 0 before the first put */
  size_t count;
} mtc_id_map; /* zero-initialized is an empty map */

/* The value under id, or NULL. */
void *mtc_id_map_get(const mtc_id_map *map, uint64_t id);

/* Adds id (nonzero, not in the map) with value. 0, or -1 when the map had
 * to grow and could not (then it is unchanged). A put right after a remove
 * never grows, so it cannot fail. */
int mtc_id_map_put(mtc_id_map *map, uint64_t id, void *value);

/* Removes id and returns its value, or NULL when it was not there. */
void *mtc_id_map_remove(mtc_id_map *map, uint64_t id);

#endif
