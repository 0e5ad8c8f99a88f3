/* plan_bench.c — the C library alone on the example batch (528 leaves,
 * 153,628 bytes, host → cuda:0), on the other host → device scenarios, and
 * on S4 (the example batch back from cuda:0 to the host):
 * where a copy's time goes without any JavaScript. Prints, per scenario and
 * mode (background thread on/off), the median of each phase in µs:
 * create+add, submit (until it returns), wait, results, release, and the
 * plan's own staging_ns / submit_ns.
 *
 *   plan_bench [runs] [only] [piece_bytes] [threads]
 *     runs         timed runs of S1 and S4 (the others take fewer; default 500)
 *     only         scenarios to run, e.g. S2,S7 (default: all)
 *     piece_bytes  options.staging_piece_bytes (default: the library's)
 *     threads      options.staging_threads, the most staging threads one copy
 *                  uses (MTC_STAGING_THREADS sizes the pool; default: all)
 *   (needs a CUDA device; MTC_CUDA_DRIVER works too)
 *   PLAN_BENCH_PAGES=huge|small puts each leaf of 64 KiB or more in its own
 *   mapping advised for transparent huge pages or against them (default:
 *   malloc's choice), to see what the page size of the source does to staging.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "mtc.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare);
  return v[n / 2];
}

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

/* The example batch copied to cuda:0 once, as device leaves (S4's
 * sources); *keep holds their blocks. */
static batch on_device(const batch *host, mtc_plan **keep) {
  mtc_options options = MTC_OPTIONS_INIT;
  mtc_status s = mtc_plan_create(0, &options, keep);
  if (s == MTC_OK) s = mtc_plan_add_leaves(*keep, host->leaves, host->count);
  if (s == MTC_OK) s = mtc_plan_submit(*keep);
  if (s == MTC_OK) s = mtc_plan_wait(*keep);
  mtc_leaf_result *results = malloc(host->count * sizeof *results);
  if (s == MTC_OK) s = mtc_plan_results(*keep, 0, host->count, results);
  if (s != MTC_OK) die("copying S4's sources to cuda:0", s);
  batch b = {malloc(host->count * sizeof(mtc_leaf)), host->count, host->bytes};
  for (size_t i = 0; i < host->count; i++) {
    b.leaves[i] = host->leaves[i];
    b.leaves[i].address = results[i].address;
    b.leaves[i].device = 0;
  }
  free(results);
  return b;
}

static uint64_t piece_bytes; /* 0: the library's default */
static uint32_t staging_threads;

static void run(const char *name, const batch *b, int32_t target,
                int background, int runs) {
  mtc_options options = MTC_OPTIONS_INIT;
  options.use_background_thread = (uint32_t)background;
  if (piece_bytes != 0) options.staging_piece_bytes = piece_bytes;
  options.staging_threads = staging_threads;
  enum { BUILD, SUBMIT, WAIT, RESULTS, RELEASE, TOTAL, STAGE, ENQUEUE, PHASES };
  double *t[PHASES];
  for (int p = 0; p < PHASES; p++) t[p] = calloc((size_t)runs, sizeof(double));
  mtc_leaf_result *results = malloc(b->count * sizeof *results);
  int warm = runs / 4 + 3;
  for (int i = -warm; i < runs; i++) {
    double t0 = now_us();
    mtc_plan *plan = NULL;
    mtc_status s = mtc_plan_create(target, &options, &plan);
    if (s != MTC_OK) die("mtc_plan_create", s);
    s = mtc_plan_add_leaves(plan, b->leaves, b->count);
    if (s != MTC_OK) die("mtc_plan_add_leaves", s);
    double t1 = now_us();
    s = mtc_plan_submit(plan);
    if (s != MTC_OK) die("mtc_plan_submit", s);
    double t2 = now_us();
    s = mtc_plan_wait(plan);
    if (s != MTC_OK) die("mtc_plan_wait", s);
    double t3 = now_us();
    s = mtc_plan_results(plan, 0, b->count, results);
    if (s != MTC_OK) die("mtc_plan_results", s);
    double t4 = now_us();
    mtc_plan_stats stats = {.struct_size = sizeof stats};
    mtc_plan_get_stats(plan, &stats);
    mtc_plan_release(plan);
    double t5 = now_us();
    if (i < 0) continue;
    t[BUILD][i] = t1 - t0;
    t[SUBMIT][i] = t2 - t1;
    t[WAIT][i] = t3 - t2;
    t[RESULTS][i] = t4 - t3;
    t[RELEASE][i] = t5 - t4;
    t[TOTAL][i] = t4 - t0;
    t[STAGE][i] = (double)stats.staging_ns / 1e3;
    t[ENQUEUE][i] = (double)stats.submit_ns / 1e3;
  }
  double total = median(t[TOTAL], runs);
  printf("%-8s %-3s %6zu %10llu  %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f %8.1f %8.1f %7.1f\n", name,
         background ? "bg" : "fg", b->count, (unsigned long long)b->bytes,
         median(t[BUILD], runs), median(t[SUBMIT], runs), median(t[WAIT], runs),
         median(t[RESULTS], runs), median(t[RELEASE], runs), total,
         median(t[STAGE], runs), median(t[ENQUEUE], runs), (double)b->bytes / (total * 1e3));
  for (int p = 0; p < PHASES; p++) free(t[p]);
  free(results);
}

static int wanted(const char *only, const char *name) {
  if (only == NULL) return 1;
  size_t n = strlen(name);
  for (const char *p = strstr(only, name); p != NULL; p = strstr(p + 1, name)) {
    if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 500;
  const char *only = argc > 2 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
  piece_bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
  staging_threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
  if (runs < 1) runs = 1;
  int32_t devices = 0;
  mtc_status s = mtc_cuda_device_count(&devices);
  if (s != MTC_OK || devices == 0) {
    printf("plan_bench: no CUDA device (%s)\n", mtc_last_error());
    return 1;
  }
  batch example = example_batch(), tiny = tiny_batch(), large = large_batch(),
        mixed = mixed_batch();
  mtc_plan *sources;
  batch back = on_device(&example, &sources);
  mtc_block *pinned_blocks[3];
  batch example_p = in_pinned(&example, &pinned_blocks[0]),
        large_p = in_pinned(&large, &pinned_blocks[1]),
        mixed_p = in_pinned(&mixed, &pinned_blocks[2]);
  printf("medians in µs over %d runs; total = create..results (release not counted)\n", runs);
  printf("scenario mode leaves      bytes    create+add  submit    wait  results  release     total  staging  enqueue    GB/s\n");
  for (int background = 1; background >= 0; background--) {
    if (wanted(only, "S1")) run("S1", &example, 0, background, runs);
    if (wanted(only, "S3")) run("S3", &tiny, 0, background, runs / 4 + 10);
    if (wanted(only, "S2")) run("S2", &large, 0, background, runs / 20 + 10);
    if (wanted(only, "S7")) run("S7", &mixed, 0, background, runs / 4 + 10);
    if (wanted(only, "S4")) run("S4", &back, MTC_DEVICE_CPU, background, runs);
    if (wanted(only, "S1p")) run("S1p", &example_p, 0, background, runs);
    if (wanted(only, "S2p")) run("S2p", &large_p, 0, background, runs / 20 + 10);
    if (wanted(only, "S7p")) run("S7p", &mixed_p, 0, background, runs / 4 + 10);
  }
  for (int i = 0; i < 3; i++) mtc_block_release(pinned_blocks[i]);
  mtc_plan_release(sources);
  return 0;
}
