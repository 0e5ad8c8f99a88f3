/* batches.h — the batches plan_bench.c copies: the example batch (S1),
 * 10,000 tiny leaves (S3), 8 × 16 MiB (S2), a mixed batch (S7), a batch
 * laid out in one pinned block as an arena would (the S*p sources), and a
 * batch copied to a device once (device sources and destinations).
 * Included by plan_bench.c only (one translation unit: the bench builds
 * with one compiler command). */
#ifndef MTC_BENCH_BATCHES_H
#define MTC_BENCH_BATCHES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mtc.h"

static void die(const char *what, mtc_status s) {
  fprintf(stderr, "%s: %s (%s)\n", what, mtc_status_name(s), mtc_last_error());
  exit(1);
}

/* Leaves of `count` host buffers of the given sizes and element sizes. */
typedef struct batch {
  mtc_leaf *leaves;
  size_t count;
  uint64_t bytes;
} batch;

/* A leaf's source memory: malloc'd, or with PLAN_BENCH_PAGES set and 64 KiB
 * or more, a mapping of its own advised for or against huge pages. */
static void *source_memory(uint64_t bytes) {
  const char *pages = getenv("PLAN_BENCH_PAGES");
  if (pages == NULL || bytes < (64u << 10)) return malloc(bytes ? bytes : 1);
  void *data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  madvise(data, bytes, strcmp(pages, "huge") == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return data;
}

static void add(batch *b, uint64_t bytes, uint32_t element_size) {
  b->leaves = realloc(b->leaves, (b->count + 1) * sizeof *b->leaves);
  void *data = source_memory(bytes);
  memset(data, (int)(b->count & 0xff), bytes);
  mtc_leaf leaf = {(uint64_t)(uintptr_t)data, bytes, 0, MTC_DEVICE_CPU, element_size, 0, 0};
  b->leaves[b->count++] = leaf;
  b->bytes += bytes;
}

static batch example_batch(void) {
  static const int gt[4] = {60, 100, 45, 120};
  static const int visible[4][6] = {{30, 20, 40, 10, 50, 20},
                                    {60, 40, 30, 70, 20, 50},
                                    {10, 20, 10, 30, 20, 10},
                                    {80, 50, 60, 40, 70, 30}};
  batch b = {0};
  for (int s = 0; s < 16; s++) {
    int c = s % 4;
    for (int cam = 0; cam < 6; cam++) {
      uint64_t n = (uint64_t)visible[c][cam];
      add(&b, n * 16, 4); /* bounding_boxes [n,4] f32 */
      add(&b, n * 8, 8);  /* class_ids [n] i64 */
      add(&b, n, 1);      /* active [n] u8 */
      add(&b, n * 4, 4);  /* depths [n] f32 */
      add(&b, 48, 4);     /* proj_mat [3,4] f32 */
    }
    uint64_t n = (uint64_t)gt[c];
    add(&b, n * 28, 4); /* bounding_boxes_3d [N,7] f32 */
    add(&b, n * 8, 8);  /* class_ids */
    add(&b, n, 1);      /* active */
  }
  return b;
}

static batch tiny_batch(void) {
  batch b = {0};
  uint64_t state = 3;
  for (int i = 0; i < 10000; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    add(&b, 4 * (1 + (state >> 58)), 4); /* 4 to 256 bytes */
  }
  return b;
}

static batch large_batch(void) {
  batch b = {0};
  for (int i = 0; i < 8; i++) add(&b, 16u << 20, 4);
  return b;
}

/* S7, mixed: 4 leaves of 1.5-2 MB, 4 of 100-130 KB and 160 of 40-400
 * bytes, as a batch of point clouds with labels and small arrays. */
static batch mixed_batch(void) {
  batch b = {0};
  uint64_t state = 7;
  for (int cloud = 0; cloud < 4; cloud++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    add(&b, (1536u << 10) + (state >> 44) % (512u << 10) / 4 * 4, 4);
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    add(&b, 100000 + (state >> 40) % 30000 / 4 * 4, 4);
    for (int k = 0; k < 40; k++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      add(&b, 40 + (state >> 40) % 361 / 4 * 4, 4);
    }
  }
  return b;
}

/* `host`'s leaves copied into one pinned block of the library's, one after
 * another at 16-byte boundaries, as an arena lays them out (the S1p, S2p,
 * S7p sources): a copy reads them in place. */
static batch in_pinned(const batch *host, mtc_block **keep) {
  uint64_t total = 0;
  for (size_t i = 0; i < host->count; i++) total = (total + 15) / 16 * 16 + host->leaves[i].bytes;
  mtc_status s = mtc_host_block_alloc(0, total, keep);
  if (s != MTC_OK) die("mtc_host_block_alloc", s);
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  mtc_block_get_info(*keep, &info);
  batch b = {malloc(host->count * sizeof(mtc_leaf)), host->count, host->bytes};
  uint64_t at = 0;
  for (size_t i = 0; i < host->count; i++) {
    at = (at + 15) / 16 * 16;
    b.leaves[i] = host->leaves[i];
    b.leaves[i].address = info.address + at;
    b.leaves[i].flags |= MTC_LEAF_PINNED;
    memcpy((void *)(uintptr_t)b.leaves[i].address,
           (const void *)(uintptr_t)host->leaves[i].address, host->leaves[i].bytes);
    at += host->leaves[i].bytes;
  }
  return b;
}

/* A batch copied to `device` once, as device leaves (S4's sources, D1's
 * and D2's, and into-destinations); *keep holds their blocks, and with
 * blocks non-NULL each leaf's block is written there. */
static batch on_device(const batch *host, int32_t device, mtc_plan **keep, mtc_block **blocks) {
  mtc_options options = MTC_OPTIONS_INIT;
  mtc_status s = mtc_plan_create(device, &options, keep);
  if (s == MTC_OK) s = mtc_plan_add_leaves(*keep, host->leaves, host->count);
  if (s == MTC_OK) s = mtc_plan_submit(*keep);
  if (s == MTC_OK) s = mtc_plan_wait(*keep);
  mtc_leaf_result *results = malloc(host->count * sizeof *results);
  if (s == MTC_OK) s = mtc_plan_results(*keep, 0, host->count, results);
  if (s != MTC_OK) die("copying a batch to the device", s);
  batch b = {malloc(host->count * sizeof(mtc_leaf)), host->count, host->bytes};
  for (size_t i = 0; i < host->count; i++) {
    b.leaves[i] = host->leaves[i];
    b.leaves[i].address = results[i].address;
    b.leaves[i].device = device;
    if (blocks != NULL) blocks[i] = results[i].block;
  }
  free(results);
  return b;
}

#endif
