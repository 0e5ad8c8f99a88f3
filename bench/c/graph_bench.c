/* graph_bench.c — does replaying a CUDA graph beat enqueuing directly, for
 * the device work of a prepared copy of the example batch (528 leaves,
 * 153,628 bytes)? libmtc packs those leaves into one pinned staging chunk and
 * issues one cuMemcpyHtoDAsync; a prepared copy could capture that work once
 * and replay it. This times both, with the driver alone (no libmtc):
 *
 *   direct ×1     one cuMemcpyHtoDAsync of 153,628 bytes, pinned → device
 *                 (the floor of a copy); graph ×1: the same, captured once on
 *                 a non-blocking stream, instantiated, then cuGraphLaunch
 *   direct ×8     eight copies of an eighth each (a chunked batch); graph ×8
 *   direct ×64    64 copies (the unpacked shape: many DMAs); graph ×64
 *   new dst       one copy to another device buffer each run; the graph
 *                 points its node there with cuGraphExecMemcpyNodeSetParams
 *                 before each launch (a prepared copy that makes fresh blocks)
 *
 * Every run enqueues, records an event and synchronizes it. Prints the
 * median over the runs of the issue time (host time to enqueue, event record
 * included) and of the total (issue + cuEventSynchronize), in µs, with
 * graph/direct ratios, and the issue cost of one cuMemcpyHtoDAsync. A graph
 * is worth building into prepared copies only where its rows beat direct's,
 * new dst included (fresh output blocks need a node update every launch).
 *
 *   graph_bench [runs]      runs per case (default 2000)
 *   MTC_CUDA_DRIVER         the driver to load (default libcuda.so.1)
 *
 * A driver without the graph calls (the emulated one) gets the direct cases
 * and a line naming the missing call, and exit status 0. Any failed call
 * prints its CUresult and exits 1.
 */
#define _DEFAULT_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The driver's types, as lib/src/cuda/driver_api.h declares them, plus the
 * graph ones that libmtc does not use. */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef unsigned long long CUdeviceptr;

enum {
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
};

/* cuda.h's CUDA_MEMCPY3D (a memcpy node's parameters): 200 bytes. */
typedef struct CUDA_MEMCPY3D_st {
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray, *reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray, *reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

_Static_assert(sizeof(CUDA_MEMCPY3D) == 200, "CUDA_MEMCPY3D is 200 bytes");

/* Entry points, bound by name with dlsym. The direct ones are needed; any
 * graph one missing skips the graph cases. */
#define DIRECT_CALLS(X)                                                            \
  X(cuInit, (unsigned flags))                                                      \
  X(cuGetErrorName, (CUresult error, const char **name))                           \
  X(cuDeviceGet, (CUdevice * device, int ordinal))                                 \
  X(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice device))                  \
  X(cuCtxSetCurrent, (CUcontext ctx))                                              \
  X(cuStreamCreate, (CUstream * stream, unsigned flags))                           \
  X(cuStreamDestroy_v2, (CUstream stream))                                         \
  X(cuEventCreate, (CUevent * event, unsigned flags))                              \
  X(cuEventDestroy_v2, (CUevent event))                                            \
  X(cuEventRecord, (CUevent event, CUstream stream))                               \
  X(cuEventSynchronize, (CUevent event))                                           \
  X(cuMemHostAlloc, (void **ptr, size_t bytes, unsigned flags))                    \
  X(cuMemFreeHost, (void *ptr))                                                    \
  X(cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes))                              \
  X(cuMemFree_v2, (CUdeviceptr ptr))                                               \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))
/* cuGraphInstantiateWithFlags is the driver's since 11.4; the older exported
 * cuGraphInstantiate takes an error log and is not a stand-in for it. */
#define GRAPH_CALLS(X)                                                             \
  X(cuStreamBeginCapture_v2, (CUstream stream, int mode))                          \
  X(cuStreamEndCapture, (CUstream stream, CUgraph * graph))                        \
  X(cuGraphInstantiateWithFlags, (CUgraphExec * exec, CUgraph graph, unsigned long long flags)) \
  X(cuGraphLaunch, (CUgraphExec exec, CUstream stream))                            \
  X(cuGraphGetNodes, (CUgraph graph, CUgraphNode * nodes, size_t * count))         \
  X(cuGraphMemcpyNodeGetParams, (CUgraphNode node, CUDA_MEMCPY3D * params))        \
  X(cuGraphExecMemcpyNodeSetParams,                                                \
    (CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D *params, CUcontext ctx)) \
  X(cuGraphExecDestroy, (CUgraphExec exec))                                        \
  X(cuGraphDestroy, (CUgraph graph))

#define DECLARE(name, params) static CUresult(*name) params;
DIRECT_CALLS(DECLARE)
GRAPH_CALLS(DECLARE)
#undef DECLARE

/* Binds one call of a list; `missing` keeps the first name not found. */
#define BIND(name, params) \
  if ((*(void **)&name = dlsym(lib, #name)) == NULL && missing == NULL) missing = #name;

static void check(CUresult r, const char *what) {
  if (r == 0) return;
  const char *name = NULL;
  if (cuGetErrorName == NULL || cuGetErrorName(r, &name) != 0 || name == NULL) name = "?";
  fprintf(stderr, "graph_bench: %s: CUresult %d (%s)\n", what, r, name);
  exit(1);
}
#define CHECK(call) check(call, #call)

enum { BATCH_BYTES = 153628, DESTINATIONS = 8 };

static CUcontext ctx;
static CUstream stream;
static CUevent done;
static unsigned char *host;                   /* the pinned staging chunk */
static CUdeviceptr device[DESTINATIONS];      /* [0] unless a case rotates */

/* The batch as `pieces` copies of about equal size, to `dst`. */
static void enqueue_copies(int pieces, CUdeviceptr dst) {
  for (int i = 0; i < pieces; i++) {
    size_t from = (size_t)BATCH_BYTES * (size_t)i / (size_t)pieces;
    size_t to = (size_t)BATCH_BYTES * (size_t)(i + 1) / (size_t)pieces;
    CHECK(cuMemcpyHtoDAsync_v2(dst + from, host + from, to - from, stream));
  }
}

/* One case: direct when exec is NULL, else a graph of the same copies. */
typedef struct bench_case {
  int pieces;
  int rotate;           /* a new destination each run */
  CUgraph graph;
  CUgraphExec exec;
  CUgraphNode node;     /* the copy's node, when rotate */
  CUDA_MEMCPY3D params; /* its parameters at capture */
} bench_case;

static void issue(bench_case *c, int run) {
  CUdeviceptr dst = device[c->rotate ? run % DESTINATIONS : 0];
  if (c->exec == NULL) {
    enqueue_copies(c->pieces, dst);
    return;
  }
  if (c->rotate) {
    c->params.dstDevice = dst;
    CHECK(cuGraphExecMemcpyNodeSetParams(c->exec, c->node, &c->params, ctx));
  }
  CHECK(cuGraphLaunch(c->exec, stream));
}

/* Captures the direct form of c into a graph and instantiates it. */
static void capture(bench_case *c) {
  CHECK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  enqueue_copies(c->pieces, device[0]);
  CHECK(cuStreamEndCapture(stream, &c->graph));
  CHECK(cuGraphInstantiateWithFlags(&c->exec, c->graph, 0));
  if (!c->rotate) return;
  size_t count = 0;
  CHECK(cuGraphGetNodes(c->graph, NULL, &count));
  if (count != 1) {
    fprintf(stderr, "graph_bench: one copy captured as %zu nodes\n", count);
    exit(1);
  }
  CHECK(cuGraphGetNodes(c->graph, &c->node, &count));
  CHECK(cuGraphMemcpyNodeGetParams(c->node, &c->params));
}

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

typedef struct timing {
  double issue, total;
} timing;

/* Medians over `runs` runs after a warm-up (a graph's first launch uploads it). */
static timing measure(bench_case *c, int runs) {
  double *issued = calloc((size_t)runs, sizeof(double));
  double *total = calloc((size_t)runs, sizeof(double));
  int warm = runs / 4 + 3;
  for (int i = 0; i < warm + runs; i++) {
    double t0 = now_us();
    issue(c, i);
    CHECK(cuEventRecord(done, stream));
    double t1 = now_us();
    CHECK(cuEventSynchronize(done));
    double t2 = now_us();
    if (i < warm) continue;
    issued[i - warm] = t1 - t0;
    total[i - warm] = t2 - t0;
  }
  timing m = {median(issued, runs), median(total, runs)};
  free(issued);
  free(total);
  return m;
}

static void print_row(const char *name, timing t, const timing *direct) {
  printf("%-17s %9.2f %9.2f", name, t.issue, t.total);
  if (direct != NULL) printf(" %10.2f %10.2f", t.issue / direct->issue, t.total / direct->total);
  printf("\n");
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* rows before an error line, in a log too */
  int runs = argc > 1 ? atoi(argv[1]) : 2000;
  if (runs < 1) runs = 1;
  const char *path = getenv("MTC_CUDA_DRIVER");
  if (path == NULL || *path == '\0') path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "graph_bench: cannot load the CUDA driver %s: %s\n", path, dlerror());
    return 1;
  }
  const char *missing = NULL;
  DIRECT_CALLS(BIND)
  if (missing != NULL) {
    fprintf(stderr, "graph_bench: the driver %s has no %s\n", path, missing);
    return 1;
  }
  GRAPH_CALLS(BIND)
  const char *graph_missing = missing;

  CUdevice dev;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CHECK(cuMemHostAlloc((void **)&host, BATCH_BYTES, 0));
  for (int i = 0; i < BATCH_BYTES; i++) host[i] = (unsigned char)i;
  for (int i = 0; i < DESTINATIONS; i++) CHECK(cuMemAlloc_v2(&device[i], BATCH_BYTES));

  printf("graph_bench: %d bytes, pinned host -> cuda:0; medians in µs over %d runs; "
         "g/d = graph / direct\n", BATCH_BYTES, runs);
  printf("%-17s %9s %9s %10s %10s\n", "case", "issue", "total", "issue g/d", "total g/d");
  static const struct {
    const char *name;
    int pieces, rotate;
  } shapes[] = {{"x1", 1, 0}, {"x8", 8, 0}, {"x64", 64, 0}, {"x1 new dst", 1, 1}};
  enum { SHAPES = sizeof shapes / sizeof shapes[0] };
  timing direct[SHAPES];
  char name[32];
  for (int s = 0; s < SHAPES; s++) {
    bench_case c = {.pieces = shapes[s].pieces, .rotate = shapes[s].rotate};
    direct[s] = measure(&c, runs);
    snprintf(name, sizeof name, "direct %s", shapes[s].name);
    print_row(name, direct[s], NULL);
    if (graph_missing != NULL) continue;
    capture(&c);
    snprintf(name, sizeof name, "graph %s", shapes[s].name);
    print_row(name, measure(&c, runs), &direct[s]);
    CHECK(cuGraphExecDestroy(c.exec));
    CHECK(cuGraphDestroy(c.graph));
  }
  /* The event record is in every issue time; the step from x1 to x64 is not. */
  printf("cuMemcpyHtoDAsync issue: %.2f µs with the event record (direct x1), %.2f µs a further copy\n",
         direct[0].issue, (direct[2].issue - direct[0].issue) / 63);
  if (graph_missing != NULL) {
    printf("graph cases not run: the driver %s has no %s\n", path, graph_missing);
  }
  for (int i = 0; i < DESTINATIONS; i++) CHECK(cuMemFree_v2(device[i]));
  CHECK(cuMemFreeHost(host));
  CHECK(cuEventDestroy_v2(done));
  CHECK(cuStreamDestroy_v2(stream));
  return 0;
}
