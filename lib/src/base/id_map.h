/* id_map.h — a map from nonzero 64-bit ids to pointers: the owners' ledger
 * finds owners and refs by the numbers callers hold; and the id spaces those
 * numbers come from. Not thread-safe: the user locks. */
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

/* Where ids come from. An id is below 2^53 (exact as a JavaScript number),
 * has bit 52 set (so it is never 0) and bit 51 saying its space's kind, and
 * in its low 51 bits a counter XOR the space's key. The counter only grows,
 * so an id is never handed out twice in a process; the key is drawn at
 * random per process, so an id kept from another process names something
 * here only by chance: it decodes to a counter uniform over 2^51 values,
 * and names one of N live ids with probability N / 2^51 (4.4e-10 for a
 * million live ids). Not thread-safe: the user locks. */
typedef struct mtc_id_space {
  uint64_t kind; /* 0 or 1 */
  uint64_t key;  /* 51 bits */
  uint64_t next; /* the next counter; 0 before init */
} mtc_id_space;

/* Counters run from 1 to MTC_ID_COUNTERS - 1. */
#define MTC_ID_COUNTERS (1ull << 51)

/* Starts `space` for ids of `kind` (0 or 1) under `key` (its low 51 bits). */
void mtc_id_space_init(mtc_id_space *space, uint64_t kind, uint64_t key);

/* A new id of the space, or 0 once its counters are used up. */
uint64_t mtc_id_space_next(mtc_id_space *space);

/* 1 when id was handed out by this space (live or not), else 0: the id of
 * another space or another process (but for the chance above), or never
 * handed out. */
int mtc_id_space_issued(const mtc_id_space *space, uint64_t id);

/* 64 random bits for a key: from /dev/urandom, else from the clock, the
 * process id and an address, mixed. */
uint64_t mtc_id_random_key(void);

#endif
