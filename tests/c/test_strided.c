/* test_strided.c — N-d strided host leaves (mtc_plan_set_leaf_layout).
 * First the gather alone: random layouts of every rank and element size
 * (transposed, stepped, broadcast, overlapping), cut anywhere and split
 * over the staging threads, checked byte for byte against a gather one
 * element at a time. Then whole copies, packed and unpacked, to cuda:0
 * and back and to the host on the emulated driver, with the pinned pool's
 * limit at its default and at 1 MiB; then the checks of the layout.
 *
 *   test_strided EMULATED_DRIVER_PATH
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helpers.h"
#include "stage/stage_copy.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(uint64_t bound) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return bound ? rng_state % bound : 0;
}

static uint64_t layout_elements(const mtc_leaf_layout *l) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < l->rank; d++) n *= l->shape[d];
  return n;
}

/* Bytes the layout reaches from its first element, plus one element. */
static uint64_t layout_span(const mtc_leaf_layout *l, uint32_t element_size) {
  if (layout_elements(l) == 0) return 1;
  uint64_t reach = 0;
  for (uint32_t d = 0; d < l->rank; d++) reach += (l->shape[d] - 1) * l->byte_strides[d];
  return reach + element_size;
}

/* The dense image, one element at a time, as the definition says. */
static uint8_t *reference_gather(const mtc_leaf_layout *l, uint32_t es, const uint8_t *src) {
  uint64_t n = layout_elements(l);
  uint8_t *out = malloc((size_t)(n * es) + 1);
  for (uint64_t e = 0; e < n; e++) {
    uint64_t rest = e, offset = 0;
    for (uint32_t d = l->rank; d-- > 0;) {
      offset += (rest % l->shape[d]) * l->byte_strides[d];
      rest /= l->shape[d];
    }
    memcpy(out + e * es, src + offset, es);
  }
  return out;
}

/* A random layout of about `elements` elements or fewer. */
static mtc_leaf_layout random_layout(uint32_t es, uint64_t elements) {
  mtc_leaf_layout l = {0};
  l.struct_size = sizeof l;
  l.rank = 1 + (uint32_t)next_random(MTC_LAYOUT_MAX_RANK);
  uint64_t left = elements;
  for (uint32_t d = 0; d < l.rank; d++) {
    uint64_t extent = 1 + next_random(d + 1 == l.rank ? left : (left > 7 ? 7 : left));
    if (extent > left) extent = left ? left : 1;
    l.shape[d] = extent;
    left = left / extent ? left / extent : 1;
    switch (next_random(5)) {
      case 0: l.byte_strides[d] = 0; break;                       /* broadcast */
      case 1: l.byte_strides[d] = es; break;                      /* contiguous */
      case 2: l.byte_strides[d] = es * (1 + next_random(9)); break; /* stepped */
      default: l.byte_strides[d] = es * (1 + next_random(3000)); break; /* transposed, far */
    }
  }
  return l;
}

/* Gathers [begin, end) of the layout's image with the given threads and
 * compares it with the reference. */
static void gather_once(const mtc_leaf_layout *l, uint32_t es, unsigned threads, int cut) {
  mtc_strided s;
  uint64_t bytes = layout_elements(l) * es;
  uint8_t *src = random_bytes((size_t)layout_span(l, es));
  uint8_t *expect = reference_gather(l, es, src);
  uint8_t *out = malloc((size_t)bytes + 64);
  memset(out, 0xA5, (size_t)bytes + 64);
  mtc_stage_segment seg = {out, src, 0, bytes, 0, 0, NULL};
  if (cut) { /* a piece of the image, cut inside elements */
    seg.begin = bytes / 3 + 1 > bytes ? 0 : bytes / 3 + (bytes > 2);
    seg.end = bytes - bytes / 5;
    if (seg.end < seg.begin) seg.end = seg.begin;
  }
  int strided = mtc_strided_simplify(l, es, &s);
  if (strided) seg.strided = &s;
  mtc_stage_copy(&seg, 1, threads);
  uint64_t n = seg.end - seg.begin;
  int exact = memcmp(out, expect + seg.begin, (size_t)n) == 0;
  int guarded = 1;
  for (uint64_t i = n; i < n + 64; i++) guarded &= out[i] == 0xA5;
  if (!exact || !guarded) {
    printf("rank %u, element %u, %llu bytes [%llu, %llu), %u threads: %s\n", l->rank, es,
           (unsigned long long)bytes, (unsigned long long)seg.begin,
           (unsigned long long)seg.end, threads, exact ? "wrote past the end" : "bytes differ");
  }
  CHECK(exact);
  CHECK(guarded);
  free(src);
  free(expect);
  free(out);
}

static void test_gather(void) {
  static const uint32_t sizes[] = {1, 2, 4, 8, 16};
  static const unsigned threads[] = {1, 3, 0};
  for (int round = 0; round < 300; round++) {
    uint32_t es = sizes[round % 5];
    /* Small ones, and ones past the parallel threshold (256 KiB) that the
     * staging threads split. */
    uint64_t elements = round % 3 == 0 ? (700 * KiB + next_random(99 * KiB)) / es
                                       : 1 + next_random(5000);
    mtc_leaf_layout l = random_layout(es, elements);
    gather_once(&l, es, threads[round % 3], round % 2);
  }
  /* A transpose of 601 x 523 float32: element-sized runs, 1.2 MB. */
  mtc_leaf_layout t = {sizeof t, 2, {523, 601}, {4, 4 * 523}};
  for (int k = 0; k < 3; k++) gather_once(&t, 4, threads[k], k == 1);
  /* A simplification that leaves the layout dense is reported as such. */
  mtc_strided s;
  mtc_leaf_layout dense = {sizeof dense, 3, {5, 1, 7}, {28, 999, 4}};
  CHECK(mtc_strided_simplify(&dense, 4, &s) == 0);
  mtc_leaf_layout column = {sizeof column, 2, {9, 3}, {40, 4}};
  CHECK(mtc_strided_simplify(&column, 4, &s) == 1);
  CHECK(s.rank == 1 && s.run_bytes == 12 && s.byte_strides[0] == 40);
}

/* ------------------------------------------------------ through a plan */

typedef struct strided_case {
  mtc_leaf leaf;
  mtc_leaf_layout layout;
  uint8_t *source;
  uint8_t *expect;
} strided_case;

static strided_case make_case(mtc_leaf_layout layout, uint32_t es) {
  strided_case c;
  c.layout = layout;
  c.source = random_bytes((size_t)layout_span(&layout, es));
  c.expect = reference_gather(&layout, es, c.source);
  c.leaf = make_leaf(host_address(c.source), layout_elements(&layout) * es, es, MTC_DEVICE_CPU);
  return c;
}

static void add_cases(mtc_plan *plan, strided_case *cases, size_t count) {
  for (size_t i = 0; i < count; i++) CHECK_OK(mtc_plan_add_leaf(plan, &cases[i].leaf, NULL));
  for (size_t i = 0; i < count; i++) CHECK_OK(mtc_plan_set_leaf_layout(plan, i, &cases[i].layout));
}

/* Copies the cases to `target` (for cuda:0, then back to the host) and
 * compares every byte; `packed` leaves must say so. */
static void copy_cases(strided_case *cases, size_t count, int32_t target, const mtc_options *o,
                       const char *what) {
  mtc_plan *plan = NULL, *down = NULL;
  mtc_leaf_result *results = calloc(count, sizeof *results);
  CHECK_OK(mtc_plan_create(target, o, &plan));
  add_cases(plan, cases, count);
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, count, results));
  for (size_t i = 0; i < count; i++) {
    int packable = o->pack_cpu_tensors && cases[i].leaf.bytes <= o->pack_threshold_bytes;
    CHECK(!(results[i].flags & MTC_RESULT_REUSED));
    if (cases[i].leaf.bytes > 0) CHECK(!!(results[i].flags & MTC_RESULT_PACKED) == packable);
  }
  if (target != MTC_DEVICE_CPU) {
    mtc_leaf *back = calloc(count, sizeof *back);
    for (size_t i = 0; i < count; i++) {
      back[i] = make_leaf(results[i].address, cases[i].leaf.bytes, cases[i].leaf.element_size, 0);
    }
    mtc_options plain = MTC_OPTIONS_INIT;
    CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, &plain, &down));
    CHECK_OK(mtc_plan_add_leaves(down, back, count));
    CHECK_OK(mtc_plan_submit(down));
    CHECK_OK(mtc_plan_wait(down));
    CHECK_OK(mtc_plan_results(down, 0, count, results));
    free(back);
  }
  for (size_t i = 0; i < count; i++) {
    const uint8_t *got = (const uint8_t *)(uintptr_t)results[i].address;
    int exact = cases[i].leaf.bytes == 0 ||
                memcmp(got, cases[i].expect, (size_t)cases[i].leaf.bytes) == 0;
    if (!exact) printf("%s: leaf %zu (%llu bytes) differs\n", what, i,
                       (unsigned long long)cases[i].leaf.bytes);
    CHECK(exact);
  }
  mtc_plan_release(down);
  mtc_plan_release(plan);
  free(results);
}

static void test_plans(void) {
  enum { N = 9 };
  strided_case cases[N];
  /* Transpose, column slice, step slice, broadcast, 5-d, each small and
   * large (past 64 KiB, the threshold here), and an empty one. */
  cases[0] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 2, {7, 5}, {4, 28}}, 4);
  cases[1] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 2, {301, 257}, {2, 602}}, 2);
  cases[2] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 2, {13, 3}, {80, 8}}, 8);
  cases[3] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 2, {1000, 77}, {1600, 16}}, 16);
  cases[4] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 1, {33}, {3}}, 1);
  cases[5] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 3, {64, 33, 41}, {0, 41, 1}}, 1);
  cases[6] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 5, {2, 3, 1, 4, 5}, {8, 400, 7, 100, 16}}, 4);
  cases[7] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 5, {9, 7, 11, 5, 13}, {8, 72 * 11 * 5 * 13, 40, 8 * 11 * 5 * 13 * 2, 8 * 11 * 5}}, 8);
  cases[8] = make_case((mtc_leaf_layout){sizeof(mtc_leaf_layout), 3, {4, 0, 9}, {4, 4, 4}}, 4);
  cases[8].leaf.address = 0;
  for (int pinned = 1; pinned >= 0; pinned--) {
    for (int pack = 1; pack >= 0; pack--) {
      mtc_options o = MTC_OPTIONS_INIT;
      o.pack_threshold_bytes = 64 * KiB;
      o.staging_piece_bytes = 4096 * 5 + 3; /* pieces cut inside elements */
      o.use_pinned_staging = (uint32_t)pinned;
      o.pack_cpu_tensors = (uint32_t)pack;
      o.use_background_thread = (uint32_t)pinned;
      char what[64];
      snprintf(what, sizeof what, "cuda:0, pinned %d, packed %d", pinned, pack);
      copy_cases(cases, N, 0, &o, what);
      snprintf(what, sizeof what, "cpu, packed %d", pack);
      copy_cases(cases, N, MTC_DEVICE_CPU, &o, what);
    }
  }
  for (size_t i = 0; i < N; i++) {
    free(cases[i].source);
    free(cases[i].expect);
  }
}

/* ------------------------------------------------------------- checks */

static void test_checks(void) {
  uint8_t data[256];
  memset(data, 7, sizeof data);
  mtc_leaf host = make_leaf(host_address(data), 16, 4, MTC_DEVICE_CPU);
  mtc_leaf device = make_leaf(0x1000, 16, 4, 0);
  mtc_leaf rows = host;
  rows.row_count = 2;
  rows.row_pitch = 12;
  mtc_leaf_layout good = {sizeof good, 2, {2, 2}, {4, 8}};
  mtc_plan *plan;
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &host, NULL));
  CHECK_OK(mtc_plan_add_leaf(plan, &device, NULL));
  CHECK_OK(mtc_plan_add_leaf(plan, &rows, NULL));
  CHECK_STATUS(mtc_plan_set_leaf_layout(NULL, 0, &good), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 3, &good), MTC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mtc_last_error(), "leaf 3: no such leaf") != NULL);
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 1, &good), MTC_ERR_UNSUPPORTED);
  CHECK(strstr(mtc_last_error(), "leaf 1: strided leaves must be in host memory") != NULL);
  CHECK(mtc_plan_error_leaf(plan) == 1);
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 2, &good), MTC_ERR_UNSUPPORTED);
  mtc_leaf_layout bad = good;
  bad.rank = 0;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  bad.rank = MTC_LAYOUT_MAX_RANK + 1;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mtc_last_error(), "rank 9 is not 1..8") != NULL);
  bad = good;
  bad.shape[1] = 3;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mtc_last_error(), "6 elements of 4 bytes but the leaf has 16 bytes") != NULL);
  bad = good;
  bad.byte_strides[0] = UINT64_MAX - 100;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mtc_last_error(), "past the end of the address space") != NULL);
  bad.shape[0] = 4;
  bad.shape[1] = 1;
  bad.byte_strides[0] = UINT64_MAX / 2;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mtc_last_error(), "overflow") != NULL);
  bad = good;
  bad.struct_size = 8;
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &bad), MTC_ERR_INVALID_ARGUMENT);
  /* A layout, then NULL: contiguous again, so the host target reuses it. */
  CHECK_OK(mtc_plan_set_leaf_layout(plan, 0, &good));
  CHECK_OK(mtc_plan_set_leaf_layout(plan, 0, NULL));
  mtc_plan_release(plan);

  /* A layout that is dense is a contiguous leaf: reused on the host. A
   * flag bit the plan keeps for itself is ignored when it comes in. */
  mtc_leaf flagged = host;
  flagged.flags = 1u << 31;
  mtc_leaf_layout dense = {sizeof dense, 2, {2, 2}, {8, 4}};
  mtc_leaf_result r[2];
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaf(plan, &host, NULL));
  CHECK_OK(mtc_plan_add_leaf(plan, &flagged, NULL));
  CHECK_OK(mtc_plan_set_leaf_layout(plan, 0, &dense));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_STATUS(mtc_plan_set_leaf_layout(plan, 0, &good), MTC_ERR_INVALID_STATE);
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, 2, r));
  CHECK(r[0].flags & MTC_RESULT_REUSED);
  CHECK(r[1].flags & MTC_RESULT_REUSED);
  mtc_plan_release(plan);
  mtc_stats s = checked_stats();
  CHECK_EQ_U64(s.plans_live, 0);
}

int main(int argc, char **argv) {
  setenv("MTC_STAGING_THREADS", "4", 0);
  setenv("MTC_SPIN_US", "100", 0);
  test_gather();
  test_checks();
  if (driver_argument(argc, argv, "test_strided") == NULL) return 1;
  test_plans();
  /* Again through a pinned pool of 1 MiB: staging buffers of 256 KiB at
   * most, so chunks and pieces are cut to fit. */
  mtc_stats before = checked_stats();
  CHECK_OK(mtc_set_pinned_limit((uint64_t)1 << 20));
  test_plans();
  mtc_stats low = checked_stats();
  CHECK(low.pinned_high_water_bytes <= ((uint64_t)1 << 20));
  CHECK_OK(mtc_set_pinned_limit(before.pinned_limit_bytes));
  return check_summary("test_strided");
}
