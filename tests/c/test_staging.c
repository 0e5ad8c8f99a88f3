/* test_staging.c — staging at the sizes where it splits: the staging
 * threads' tasks, the parallel threshold, the streaming-store ranges and
 * their 64-byte alignment, pieces of the pinned ring, strided rows. First
 * mtc_stage_copy alone (every byte, and the bytes around each destination
 * untouched), then whole copies to cuda:0 and back on the emulated driver,
 * with the pinned pool's limit at its default and at 1 MiB.
 *
 *   test_staging EMULATED_DRIVER_PATH
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helpers.h"
#include "stage/stage_copy.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GUARD 64

/* Sizes at and around every boundary of the staging code. */
static const uint64_t sizes[] = {
    0, 1, 63, 64, 65,
    64 * KiB - 1, 64 * KiB, 64 * KiB + 1,      /* streaming from 64 KiB; task size */
    256 * KiB - 1, 256 * KiB, 256 * KiB + 1,   /* parallel from 256 KiB */
    1 * MiB + 3, 4 * MiB - 1, 4 * MiB, 4 * MiB + 1, /* streaming calls up to 4 MiB */
    9 * MiB + 7,
};
#define SIZE_COUNT (sizeof sizes / sizeof sizes[0])

/* Stages one contiguous range of n bytes from src + src_skew into a buffer
 * at dst_skew and checks every byte, and that the guard bytes on both sides
 * of the destination are untouched. */
static void one_range(uint64_t n, size_t src_skew, size_t dst_skew, unsigned threads) {
  uint8_t *src = random_bytes((size_t)n + src_skew);
  uint8_t *buffer = malloc((size_t)n + dst_skew + 2 * GUARD);
  memset(buffer, 0xA5, (size_t)n + dst_skew + 2 * GUARD);
  uint8_t *dst = buffer + GUARD + dst_skew;
  mtc_stage_segment seg = {dst, src + src_skew, 0, n, 0, 0, NULL};
  mtc_stage_copy(&seg, 1, threads);
  int exact = memcmp(dst, src + src_skew, (size_t)n) == 0;
  int guarded = 1;
  for (size_t i = 0; i < GUARD + dst_skew; i++) guarded &= buffer[i] == 0xA5;
  for (size_t i = 0; i < GUARD; i++) guarded &= dst[n + i] == 0xA5;
  if (!exact || !guarded) {
    printf("range of %llu bytes (src +%zu, dst +%zu, %u threads): %s\n", (unsigned long long)n,
           src_skew, dst_skew, threads, exact ? "bytes outside it written" : "bytes differ");
  }
  CHECK(exact);
  CHECK(guarded);
  free(src);
  free(buffer);
}

static void test_ranges(void) {
  static const size_t skews[] = {0, 1, 17, 63};
  static const unsigned threads[] = {1, 3, 0};
  for (size_t i = 0; i < SIZE_COUNT; i++) {
    for (size_t s = 0; s < 4; s++) {
      for (size_t t = 0; t < 3; t++) one_range(sizes[i], skews[s], skews[(s + 1) % 4], threads[t]);
    }
  }
}

/* Many segments in one call, contiguous and strided, some of them only a
 * part [begin, end) of their leaf's dense image (as pieces are), laid end to
 * end in one destination; checked against a plain byte-by-byte gather. */
static void test_segments(unsigned threads, uint64_t scale) {
  enum { COUNT = 24 };
  mtc_stage_segment segs[COUNT];
  uint8_t *sources[COUNT];
  uint64_t total = 0;
  uint64_t state = 12345 + scale;
  for (int i = 0; i < COUNT; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t rows = 1 + (state >> 60);             /* 1..16 rows */
    uint64_t row_bytes = 1 + (state >> 40) % scale; /* any size, odd ones too */
    uint64_t pitch = (i % 3 == 0) ? row_bytes : row_bytes + (state >> 20) % 97;
    uint64_t dense = rows * row_bytes;
    sources[i] = random_bytes((size_t)(pitch * (rows - 1) + row_bytes));
    uint64_t begin = (i % 4 == 1) ? dense / 3 : 0;
    uint64_t end = (i % 4 == 2) ? dense - dense / 5 : dense;
    segs[i].src = sources[i];
    segs[i].begin = begin;
    segs[i].end = end;
    segs[i].row_bytes = rows > 1 ? row_bytes : 0;
    segs[i].row_pitch = rows > 1 ? pitch : 0;
    segs[i].strided = NULL;
    total += end - begin;
  }
  uint8_t *out = malloc((size_t)total + 1);
  uint8_t *expect = malloc((size_t)total + 1);
  uint64_t at = 0;
  for (int i = 0; i < COUNT; i++) {
    segs[i].dst = out + at;
    for (uint64_t b = segs[i].begin; b < segs[i].end; b++) {
      uint64_t from = segs[i].row_bytes == 0
                          ? b
                          : b / segs[i].row_bytes * segs[i].row_pitch + b % segs[i].row_bytes;
      expect[at + b - segs[i].begin] = segs[i].src[from];
    }
    at += segs[i].end - segs[i].begin;
  }
  mtc_stage_copy(segs, COUNT, threads);
  int exact = memcmp(out, expect, (size_t)total) == 0;
  if (!exact) printf("segments (%u threads, rows up to %llu bytes) differ\n", threads, (unsigned long long)scale);
  CHECK(exact);
  for (int i = 0; i < COUNT; i++) free(sources[i]);
  free(out);
  free(expect);
}

/* ------------------------------------------------------ through a plan */

/* Copies the leaves to cuda:0 and back to the host and compares. */
static void round_trip(const mtc_leaf *leaves, size_t count, const mtc_options *options,
                       const char *what) {
  mtc_plan *up = NULL, *down = NULL;
  mtc_leaf_result *results = calloc(count, sizeof *results);
  mtc_leaf *back = calloc(count, sizeof *back);
  CHECK_OK(mtc_plan_create(0, options, &up));
  CHECK_OK(mtc_plan_add_leaves(up, leaves, count));
  CHECK_OK(mtc_plan_submit(up));
  CHECK_OK(mtc_plan_wait(up));
  CHECK_OK(mtc_plan_results(up, 0, count, results));
  for (size_t i = 0; i < count; i++) {
    back[i] = make_leaf(results[i].address, leaves[i].bytes, leaves[i].element_size, 0);
  }
  mtc_options plain = MTC_OPTIONS_INIT;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &plain, &down));
  CHECK_OK(mtc_plan_add_leaves(down, back, count));
  CHECK_OK(mtc_plan_submit(down));
  CHECK_OK(mtc_plan_wait(down));
  CHECK_OK(mtc_plan_results(down, 0, count, results));
  for (size_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &leaves[i];
    const uint8_t *got = (const uint8_t *)(uintptr_t)results[i].address;
    const uint8_t *src = (const uint8_t *)(uintptr_t)leaf->address;
    int exact = 1;
    if (leaf->row_count > 1) {
      uint64_t row = leaf->bytes / leaf->row_count;
      for (uint32_t r = 0; r < leaf->row_count; r++) {
        exact &= memcmp(got + r * row, src + r * leaf->row_pitch, (size_t)row) == 0;
      }
    } else if (leaf->bytes > 0) {
      exact = memcmp(got, src, (size_t)leaf->bytes) == 0;
    }
    if (!exact) printf("%s: leaf %zu (%llu bytes) differs after the round trip\n", what, i,
                       (unsigned long long)leaf->bytes);
    CHECK(exact);
  }
  mtc_plan_release(down);
  mtc_plan_release(up);
  free(results);
  free(back);
}

static void test_plans(void) {
  const uint64_t piece = 64 * KiB;
  /* Own leaves at piece boundaries, packed ones beside them, one strided
   * leaf whose rows cross pieces, and a leaf larger than the whole ring. */
  const uint64_t lengths[] = {1, piece - 1, piece, piece + 1, 3 * piece - 1,
                              5 * piece / 2, 7, 300 * KiB + 5, 4 * piece * 3 + 13};
  enum { N = sizeof lengths / sizeof lengths[0] + 1 };
  mtc_leaf leaves[N];
  uint8_t *data[N];
  for (size_t i = 0; i + 1 < N; i++) {
    data[i] = random_bytes((size_t)lengths[i]);
    leaves[i] = make_leaf(host_address(data[i]), lengths[i], 1, MTC_DEVICE_CPU);
  }
  /* 97 rows of 1,001 bytes, 1,100 apart: 97,097 bytes dense. */
  data[N - 1] = random_bytes(1100 * 97);
  leaves[N - 1] = make_leaf(host_address(data[N - 1]), 1001 * 97, 1, MTC_DEVICE_CPU);
  leaves[N - 1].row_count = 97;
  leaves[N - 1].row_pitch = 1100;

  for (int pinned = 1; pinned >= 0; pinned--) {
    for (int pack = 1; pack >= 0; pack--) {
      for (int background = 1; background >= 0; background--) {
        mtc_options o = MTC_OPTIONS_INIT;
        o.staging_piece_bytes = piece;
        o.pack_threshold_bytes = 64 * KiB;
        o.use_pinned_staging = (uint32_t)pinned;
        o.pack_cpu_tensors = (uint32_t)pack;
        o.use_background_thread = (uint32_t)background;
        char what[96];
        snprintf(what, sizeof what, "pinned %d, packed %d, background %d", pinned, pack, background);
        round_trip(leaves, N, &o, what);
        /* Pieces of an odd size that divides nothing. */
        o.staging_piece_bytes = 4096 * 3 + 1;
        round_trip(leaves, N, &o, what);
      }
    }
  }
  for (size_t i = 0; i < N; i++) free(data[i]);
}

/* mtc_warm_up leaves the buffers a copy needs idle in the pool, so the copy
 * allocates no pinned memory; it stops at the pool's limit; bad devices are
 * refused. */
static void test_warm_up(void) {
  CHECK_STATUS(mtc_warm_up(-1, 1, 0, 0), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_warm_up(99, 1, 0, 0), MTC_ERR_NO_DEVICE);
  mtc_trim_pools();
  mtc_stats before = checked_stats();
  CHECK_OK(mtc_warm_up(0, 3 * 4 * MiB, 4 * MiB, 64 * MiB));
  mtc_stats warm = checked_stats();
  CHECK_EQ_U64(warm.pinned_allocations - before.pinned_allocations, 3);
  CHECK(warm.pinned_bytes_cached >= 3 * 4 * MiB);
  CHECK_EQ_U64(warm.pinned_bytes_in_use, before.pinned_bytes_in_use);
  /* A 10 MiB leaf through 4 MiB pieces: three piece buffers, all reused. */
  uint8_t *data = random_bytes(10 * MiB);
  mtc_leaf leaf = make_leaf(host_address(data), 10 * MiB, 4, MTC_DEVICE_CPU);
  mtc_options o = MTC_OPTIONS_INIT;
  o.staging_piece_bytes = 4 * MiB;
  round_trip(&leaf, 1, &o, "after warm-up");
  mtc_stats after = checked_stats();
  CHECK_EQ_U64(after.pinned_allocations, warm.pinned_allocations + 1); /* the output block */
  /* At the limit it reserves what fits and says MTC_OK. */
  CHECK_OK(mtc_set_pinned_limit(16 * MiB));
  CHECK_OK(mtc_warm_up(0, 64 * MiB, 4 * MiB, 0));
  mtc_stats limited = checked_stats();
  CHECK(limited.pinned_bytes_cached <= 16 * MiB);
  CHECK(limited.pinned_bytes_cached >= 4 * MiB);
  CHECK_OK(mtc_set_pinned_limit(1024 * MiB));
  free(data);
}

int main(int argc, char **argv) {
  setenv("MTC_STAGING_THREADS", "4", 0);
  setenv("MTC_SPIN_US", "100", 0);
  test_ranges();
  for (unsigned threads = 0; threads <= 3; threads += 3) {
    test_segments(threads, 300);
    test_segments(threads, 100 * KiB);
    test_segments(threads, 700 * KiB);
  }
  if (driver_argument(argc, argv, "test_staging") == NULL) return 1;
  test_plans();
  /* Again through a pinned pool of 1 MiB: no staging buffer above 256 KiB,
   * so chunks and pieces are cut to fit, and copies wait for each other. */
  mtc_stats before = checked_stats();
  CHECK_OK(mtc_set_pinned_limit((uint64_t)1 << 20));
  test_plans();
  mtc_stats low = checked_stats();
  CHECK(low.pinned_high_water_bytes <= ((uint64_t)1 << 20));
  CHECK_OK(mtc_set_pinned_limit(before.pinned_limit_bytes));
  test_warm_up();
  return check_summary("test_staging");
}
