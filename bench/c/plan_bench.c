/* plan_bench.c — the C library alone on the example batch (528 leaves,
 * 153,628 bytes, host → cuda:0), on the other host → device scenarios, on
 * S4 (the example batch back from cuda:0 to the host), and where there are
 * two GPUs on D1 and D2 (cuda:0 → cuda:1: the example batch and 8 × 16 MiB,
 * each by a plain plan and by a plan into existing blocks, the example
 * batch also host → cuda:1, and the floor: one peer copy of the same bytes):
 * where a copy's time goes without any JavaScript. S1prep and S1pprep are
 * the S1 and S1p batches submitted from one prepared copy each
 * (mtc/prepared.h): one mtc_prepared_submit per run, timed as the submit
 * (create+add 0). I1 and I1prep copy the example batch into existing
 * blocks of cuda:0 by a plain plan and from a prepared copy (its scatter
 * tables kept on the device). The batches: batches.h. Prints, per scenario and
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
 *   D1 and D2's floor binds the driver itself: MTC_CUDA_DRIVER, else libcuda.so.1.
 *   PLAN_BENCH_PAGES=huge|small puts each leaf of 64 KiB or more in its own
 *   mapping advised for transparent huge pages or against them (default:
 *   malloc's choice), to see what the page size of the source does to staging.
 */
#define _DEFAULT_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batches.h"
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

static uint64_t piece_bytes; /* 0: the library's default */
static int wanted(const char *only, const char *name);
static uint32_t staging_threads;

/* A prepared copy of b to target under these options (made of a plan that
 * is never submitted). */
static mtc_prepared *prepared_of(const batch *b, int32_t target, const mtc_options *options,
                                 const batch *into) {
  mtc_plan *plan = NULL;
  mtc_prepared *prepared = NULL;
  mtc_status s = mtc_plan_create(target, options, &plan);
  if (s == MTC_OK && into == NULL) s = mtc_plan_add_leaves(plan, b->leaves, b->count);
  if (s == MTC_OK && into != NULL) s = mtc_plan_add_leaves_into(plan, b->leaves, into->leaves, b->count);
  if (s == MTC_OK) s = mtc_prepared_create(plan, &prepared);
  if (s != MTC_OK) die("making a prepared copy", s);
  mtc_plan_release(plan);
  return prepared;
}

/* Runs b to target `runs` times and prints the medians; with `into`
 * (destinations on target, and their blocks), as copies into them; with
 * `prepared`, each run's plan made and submitted by one call of a prepared
 * copy of b (made once), timed as its submit (create+add 0). */
static void run_plan(const char *name, const batch *b, int32_t target, int background,
                     int runs, const batch *into, mtc_block **into_blocks, int prepared) {
  mtc_options options = MTC_OPTIONS_INIT;
  options.use_background_thread = (uint32_t)background;
  if (piece_bytes != 0) options.staging_piece_bytes = piece_bytes;
  options.staging_threads = staging_threads;
  mtc_prepared *copy = prepared ? prepared_of(b, target, &options, into) : NULL;
  enum { BUILD, SUBMIT, WAIT, RESULTS, RELEASE, TOTAL, STAGE, ENQUEUE, PHASES };
  double *t[PHASES];
  for (int p = 0; p < PHASES; p++) t[p] = calloc((size_t)runs, sizeof(double));
  mtc_leaf_result *results = malloc(b->count * sizeof *results);
  int warm = runs / 4 + 3;
  for (int i = -warm; i < runs; i++) {
    double t0 = now_us(), t1 = t0;
    mtc_plan *plan = NULL;
    mtc_status s;
    if (copy != NULL) {
      s = mtc_prepared_submit(copy, b->leaves, NULL, b->count, &plan);
      if (s != MTC_OK) die("mtc_prepared_submit", s);
    } else {
      s = mtc_plan_create(target, &options, &plan);
      if (s != MTC_OK) die("mtc_plan_create", s);
      if (into == NULL) {
        s = mtc_plan_add_leaves(plan, b->leaves, b->count);
      } else {
        s = mtc_plan_add_leaves_into(plan, b->leaves, into->leaves, b->count);
        if (s == MTC_OK) s = mtc_plan_set_destination_blocks(plan, 0, into_blocks, b->count);
      }
      if (s != MTC_OK) die("adding the leaves", s);
      t1 = now_us();
      s = mtc_plan_submit(plan);
      if (s != MTC_OK) die("mtc_plan_submit", s);
    }
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
  mtc_prepared_release(copy);
}

static void run(const char *name, const batch *b, int32_t target, int background, int runs) {
  run_plan(name, b, target, background, runs, NULL, NULL, 0);
}

/* The floor of D1 and D2, bound straight from the driver: one
 * cuMemcpyPeerAsync of `bytes` from cuda:0 to cuda:1 and a synchronize,
 * with peer access enabled where the pair has it (as libmtc does). */
typedef unsigned long long devptr;
static void peer_floor(const char *name, uint64_t bytes, int runs) {
  const char *path = getenv("MTC_CUDA_DRIVER");
  void *lib = dlopen(path != NULL && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) die("dlopen of the CUDA driver for the floor", MTC_ERR_NO_DRIVER);
  int (*cuInit)(unsigned);
  int (*cuDevicePrimaryCtxRetain)(void **, int);
  int (*cuCtxPushCurrent_v2)(void *);
  int (*cuCtxPopCurrent_v2)(void **);
  int (*cuMemAlloc_v2)(devptr *, size_t);
  int (*cuMemFree_v2)(devptr);
  int (*cuStreamCreate)(void **, unsigned);
  int (*cuStreamDestroy_v2)(void *);
  int (*cuStreamSynchronize)(void *);
  int (*cuMemcpyPeerAsync)(devptr, void *, devptr, void *, size_t, void *);
  int (*cuDeviceCanAccessPeer)(int *, int, int);
  int (*cuCtxEnablePeerAccess)(void *, unsigned);
#define BIND(f) \
  if ((*(void **)&f = dlsym(lib, #f)) == NULL) die(#f, MTC_ERR_NO_DRIVER)
  BIND(cuInit); BIND(cuDevicePrimaryCtxRetain); BIND(cuCtxPushCurrent_v2); BIND(cuCtxPopCurrent_v2);
  BIND(cuMemAlloc_v2); BIND(cuMemFree_v2); BIND(cuStreamCreate); BIND(cuStreamDestroy_v2);
  BIND(cuStreamSynchronize); BIND(cuMemcpyPeerAsync); BIND(cuDeviceCanAccessPeer); BIND(cuCtxEnablePeerAccess);
#undef BIND
  void *ctx[2], *popped, *stream;
  devptr src, dst;
  int can = 0;
  if (cuInit(0u) != 0 || cuDevicePrimaryCtxRetain(&ctx[0], 0) != 0 ||
      cuDevicePrimaryCtxRetain(&ctx[1], 1) != 0 || cuCtxPushCurrent_v2(ctx[0]) != 0 ||
      cuMemAlloc_v2(&src, (size_t)bytes) != 0 || cuCtxPopCurrent_v2(&popped) != 0 ||
      cuDeviceCanAccessPeer(&can, 1, 0) != 0 || cuCtxPushCurrent_v2(ctx[1]) != 0 ||
      cuMemAlloc_v2(&dst, (size_t)bytes) != 0 || cuStreamCreate(&stream, 1u) != 0) {
    die("setting up the floor's buffers", MTC_ERR_CUDA);
  }
  if (can) {
    int r = cuCtxEnablePeerAccess(ctx[0], 0u);
    if (r != 0 && r != 704 /* already enabled */) die("cuCtxEnablePeerAccess", MTC_ERR_CUDA);
  }
  double *t = calloc((size_t)runs, sizeof(double));
  for (int i = -(runs / 4 + 3); i < runs; i++) {
    double t0 = now_us();
    if (cuMemcpyPeerAsync(dst, ctx[1], src, ctx[0], (size_t)bytes, stream) != 0 ||
        cuStreamSynchronize(stream) != 0) {
      die("the floor's peer copy", MTC_ERR_CUDA);
    }
    if (i >= 0) t[i] = now_us() - t0;
  }
  double m = median(t, runs);
  printf("%-8s %-3s %6d %10llu  %8s %8s %8s %8s %8s %9.1f %8s %8s %7.1f\n", name, "", 1,
         (unsigned long long)bytes, "", "", "", "", "", m, "", "", (double)bytes / (m * 1e3));
  cuStreamDestroy_v2(stream);
  cuMemFree_v2(dst);
  cuCtxPopCurrent_v2(&popped);
  cuCtxPushCurrent_v2(ctx[0]);
  cuMemFree_v2(src);
  cuCtxPopCurrent_v2(&popped);
  free(t);
}

/* D1 and D2: cuda:0 → cuda:1 by a plain plan, into existing blocks (named
 * with mtc_plan_set_destination_blocks), the example batch host → cuda:1
 * beside them, and the floor. */
static void two_gpus(const char *only, const batch *example, const batch *large, int runs) {
  const batch *host[2] = {example, large};
  const char *ids[2] = {"D1", "D2"};
  for (int k = 0; k < 2; k++) {
    if (!wanted(only, ids[k])) continue;
    int n = k == 0 ? runs : runs / 20 + 10;
    mtc_plan *keep0, *keep1;
    mtc_block **blocks = malloc(host[k]->count * sizeof *blocks);
    batch on0 = on_device(host[k], 0, &keep0, NULL);
    batch on1 = on_device(host[k], 1, &keep1, blocks);
    char name[16];
    for (int background = 1; background >= 0; background--) {
      run(ids[k], &on0, 1, background, n);
      snprintf(name, sizeof name, "%s into", ids[k]);
      run_plan(name, &on0, 1, background, n, &on1, blocks, 0);
      if (k == 0) run("D1 host", host[k], 1, background, n);
    }
    snprintf(name, sizeof name, "%s floor", ids[k]);
    peer_floor(name, host[k]->bytes, n);
    mtc_plan_release(keep1);
    mtc_plan_release(keep0);
    free(on0.leaves);
    free(on1.leaves);
    free(blocks);
  }
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
  mtc_plan *sources, *dest_plan;
  batch back = on_device(&example, 0, &sources, NULL);
  /* I1, I1prep: the example batch into existing blocks of cuda:0. */
  mtc_block **dest_blocks = malloc(example.count * sizeof *dest_blocks);
  batch dest = on_device(&example, 0, &dest_plan, dest_blocks);
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
    if (wanted(only, "S1prep")) run_plan("S1prep", &example, 0, background, runs, NULL, NULL, 1);
    if (wanted(only, "I1")) run_plan("I1", &example, 0, background, runs, &dest, dest_blocks, 0);
    if (wanted(only, "I1prep")) run_plan("I1prep", &example, 0, background, runs, &dest, NULL, 1);
    if (wanted(only, "S1pprep")) run_plan("S1pprep", &example_p, 0, background, runs, NULL, NULL, 1);
    if (wanted(only, "S2p")) run("S2p", &large_p, 0, background, runs / 20 + 10);
    if (wanted(only, "S7p")) run("S7p", &mixed_p, 0, background, runs / 4 + 10);
  }
  for (int i = 0; i < 3; i++) mtc_block_release(pinned_blocks[i]);
  if (devices >= 2) {
    two_gpus(only, &example, &large, runs);
  } else if (only == NULL || wanted(only, "D1") || wanted(only, "D2")) {
    printf("D1, D2: not run (needs two GPUs; this host has %d)\n", devices);
  }
  mtc_plan_release(dest_plan);
  free(dest.leaves);
  free(dest_blocks);
  mtc_plan_release(sources);
  return 0;
}
