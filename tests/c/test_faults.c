/* test_faults.c — MTC_FAULT against the emulated driver (its path in argv[1]):
 * each class of injected driver failure surfaces from submit or wait with a
 * message naming the failing call, gives back every block and pinned buffer,
 * and leaves the library able to copy exactly again.
 *
 * MTC_FAULT is read once per process, so every scenario runs in a forked
 * child with its own MTC_FAULT; the parent never calls the driver. Call
 * numbers in the specs count from the child's first call of the class,
 * setup copies included (the comments next to each spec do the sums).
 * Results are read in place: the emulated device memory is host memory. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "fake_symbols.h"

static struct {
  int (*live_device_allocations)(void);
  unsigned long long (*copy_count)(void);
  unsigned long long (*kernel_launches)(void);
} fake;

/* ------------------------------------------------------------- helpers */

#define MAX_LEAVES 48

/* Host leaves: `small` packed ones of mixed dtypes, then one of `large`
 * bytes (0: none) that gets a block of its own. */
typedef struct batch {
  size_t count;
  uint8_t *data[MAX_LEAVES];
  mtc_leaf leaves[MAX_LEAVES];
} batch;

static void make_batch(batch *b, size_t small, size_t large) {
  static const uint32_t sizes[] = {1, 2, 4, 8};
  b->count = 0;
  for (size_t i = 0; i < small; i++) {
    uint32_t element = sizes[i % 4];
    uint64_t bytes = element * (uint64_t)(3 + (i * 29) % 200);
    b->data[b->count] = random_bytes((size_t)bytes);
    b->leaves[b->count] = make_leaf(host_address(b->data[b->count]),
                                    bytes, element, MTC_DEVICE_CPU);
    b->count++;
  }
  if (large > 0) {
    b->data[b->count] = random_bytes(large);
    b->leaves[b->count] = make_leaf(host_address(b->data[b->count]),
                                    large, 4, MTC_DEVICE_CPU);
    b->count++;
  }
}

static void free_batch(batch *b) {
  for (size_t i = 0; i < b->count; i++) free(b->data[i]);
  b->count = 0;
}

static mtc_options options(uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  o.staging_piece_bytes = (uint64_t)4 << 20; /* a 17 MiB leaf: 5 pieces */
  return o;
}

/* What must be back where it was after a failed copy is released. */
typedef struct snapshot {
  mtc_stats stats;
  int device_allocations;
} snapshot;

static snapshot take_snapshot(void) {
  snapshot s;
  memset(&s, 0, sizeof s);
  s.stats.struct_size = sizeof s.stats;
  CHECK_OK(mtc_get_stats(&s.stats));
  s.device_allocations = fake.live_device_allocations();
  return s;
}

static void check_returned(const snapshot *before, const char *where) {
  snapshot now = take_snapshot();
  int failures = check_failures;
  CHECK_EQ_U64(now.stats.plans_live, before->stats.plans_live);
  CHECK_EQ_U64(now.stats.blocks_live, before->stats.blocks_live);
  CHECK_EQ_U64(now.stats.device_bytes_live, before->stats.device_bytes_live);
  CHECK_EQ_U64(now.stats.host_bytes_live, before->stats.host_bytes_live);
  CHECK_EQ_U64(now.stats.pinned_bytes_in_use,
               before->stats.pinned_bytes_in_use);
  CHECK(now.device_allocations == before->device_allocations);
  if (check_failures != failures) printf("  (after %s)\n", where);
}

/* The leaf the next failing copy must name (mtc_plan_error_leaf), or
 * NO_LEAF_CHECK; copy_fails checks it and resets it. */
#define NO_LEAF_CHECK (-2)
static int64_t blamed_leaf = NO_LEAF_CHECK;

/* One copy that must fail with `want`, every text of `texts` (NULL ends it)
 * in its message. at_submit: a foreground submit reports it already.
 * poll: wait by polling (cuEventQuery) instead of mtc_plan_wait. */
static void copy_fails(int32_t target, uint32_t background,
                       const mtc_leaf *leaves, size_t count, mtc_status want,
                       int at_submit, int poll, const char *const *texts) {
  snapshot before = take_snapshot();
  mtc_options o = options(background);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &o, &plan));
  if (plan == NULL) return;
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  mtc_status submitted = mtc_plan_submit(plan);
  CHECK_STATUS(submitted, at_submit && !background ? want : MTC_OK);
  mtc_status status;
  if (poll) {
    while ((status = mtc_plan_poll(plan)) == MTC_IN_PROGRESS) {
      struct timespec pause = {0, 100 * 1000};
      nanosleep(&pause, NULL);
    }
  } else {
    status = mtc_plan_wait(plan);
  }
  CHECK_STATUS(status, want);
  for (const char *const *text = texts; *text != NULL; text++) {
    CHECK_CONTAINS(mtc_plan_last_error(plan), *text);
    CHECK_CONTAINS(mtc_last_error(), *text);
  }
  if (blamed_leaf != NO_LEAF_CHECK) {
    if (mtc_plan_error_leaf(plan) != blamed_leaf) {
      printf("the error names leaf %lld, expected %lld\n",
             (long long)mtc_plan_error_leaf(plan), (long long)blamed_leaf);
    }
    CHECK(mtc_plan_error_leaf(plan) == blamed_leaf);
    blamed_leaf = NO_LEAF_CHECK;
  }
  CHECK_STATUS(mtc_plan_poll(plan), want); /* the failure stays */
  mtc_leaf_result result;
  CHECK_STATUS(mtc_plan_results(plan, 0, 1, &result), MTC_ERR_INVALID_STATE);
  mtc_plan_release(plan);
  check_returned(&before, mtc_status_name(want));
}

/* One copy that must succeed; every leaf's bytes must equal expect[i].
 * Returns the plan (holding the outputs) for the caller to release. */
static mtc_plan *copy_ok(int32_t target, uint32_t background,
                         const mtc_leaf *leaves, size_t count,
                         uint8_t *const *expect, mtc_leaf_result *out) {
  mtc_options o = options(background);
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, &o, &plan));
  if (plan == NULL) return NULL;
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, count));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  if (mtc_plan_results(plan, 0, count, out) != MTC_OK) {
    CHECK(!"results of a successful copy");
    return plan;
  }
  for (size_t i = 0; i < count; i++) {
    CHECK(out[i].device == target);
    int same = memcmp((const void *)(uintptr_t)out[i].address, expect[i],
                      (size_t)leaves[i].bytes) == 0;
    if (!same) printf("leaf %zu differs after the copy\n", i);
    CHECK(same);
  }
  return plan;
}

/* The batch on `device` through pageable copies (no pinned memory, one
 * device allocation and one copy per block), as device leaves. */
static mtc_plan *on_device(const batch *b, int32_t device, mtc_leaf *out) {
  mtc_options o = options(0);
  o.use_pinned_staging = 0;
  mtc_leaf_result results[MAX_LEAVES];
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(device, &o, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, b->leaves, b->count));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, b->count, results));
  for (size_t i = 0; i < b->count; i++) {
    out[i] = make_leaf(results[i].address, b->leaves[i].bytes,
                       b->leaves[i].element_size, device);
  }
  return plan;
}

#define TEXTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ----------------------------------------------------------- scenarios */

/* pinned-alloc:1-4. Each failing copy's chunk allocation fails twice: the
 * pool trims its cache and tries once more. */
static void pinned_h2d(void) {
  batch b;
  make_batch(&b, 40, 0);
  blamed_leaf = 0; /* the chunk's first leaf */
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemHostAlloc failed", "CUDA_ERROR_OUT_OF_MEMORY",
                   "injected by MTC_FAULT at pinned-alloc call 2",
                   "for the chunk that packs this leaf and 39 others"));
  blamed_leaf = 0;
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemHostAlloc failed",
                   "injected by MTC_FAULT at pinned-alloc call 4"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 1, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* pinned-alloc:1. One failed cuMemHostAlloc is recovered by the retry. */
static void pinned_recovered(void) {
  batch b;
  make_batch(&b, 12, 0);
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  CHECK_EQ_U64(stats.pinned_allocations, 1);
  free_batch(&b);
}

/* pinned-alloc:1-4. Setup is pageable: the first pinned allocations are
 * the device-to-host output blocks. */
static void pinned_d2h(void) {
  batch b;
  make_batch(&b, 4, 1 << 20);
  mtc_leaf dev[MAX_LEAVES];
  mtc_plan *setup = on_device(&b, 0, dev);
  copy_fails(MTC_DEVICE_CPU, 0, dev, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemHostAlloc failed", "pinned-alloc call 2"));
  copy_fails(MTC_DEVICE_CPU, 1, dev, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemHostAlloc failed", "pinned-alloc call 4"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(MTC_DEVICE_CPU, 0, dev, b.count, b.data, out));
  mtc_plan_release(setup);
  free_batch(&b);
}

/* device-alloc:2,device-alloc:4. A copy allocates its own (17 MiB,
 * staged) leaf, then its chunk: the own leaf's pieces are already queued
 * when the chunk's allocation fails, and the chunk's first leaf is named. */
static void device_h2d(void) {
  batch b;
  make_batch(&b, 40, 17 << 20);
  blamed_leaf = 0; /* the chunk's first leaf */
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY",
                   "device-alloc call 2", "for the chunk that packs this leaf and 39 others"));
  blamed_leaf = 0;
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemAlloc", "device-alloc call 4"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* device-alloc:3,device-alloc:5. Setup allocates 1 (chunk) and 2 (own);
 * each cuda:0 -> cuda:1 copy allocates its chunk's block, then its own
 * leaf's: the first copy fails at its chunk, the second at its own leaf. */
static void device_d2d(void) {
  batch b;
  make_batch(&b, 4, 1 << 20);
  mtc_leaf dev[MAX_LEAVES];
  mtc_plan *setup = on_device(&b, 0, dev);
  blamed_leaf = 0; /* the chunk of the 4 small leaves */
  copy_fails(1, 0, dev, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY",
                   "device-alloc call 3", "this leaf and 3 others"));
  blamed_leaf = 4; /* the 1 MiB leaf */
  copy_fails(1, 1, dev, b.count, MTC_ERR_OUT_OF_MEMORY, 1, 0,
             TEXTS("cuMemAlloc", "device-alloc call 5"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(1, 0, dev, b.count, b.data, out));
  mtc_plan_release(setup);
  free_batch(&b);
}

/* device-alloc:1=ECC_UNCORRECTABLE,device-alloc:2=999: a rule's own
 * CUresult, by name and by number; not out of memory, so MTC_ERR_CUDA. */
static void device_codes(void) {
  batch b;
  make_batch(&b, 8, 0);
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("CUDA_ERROR_ECC_UNCORRECTABLE", "(214: "));
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("CUDA_ERROR_UNKNOWN", "(999: "));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* copy-submit:4,copy-submit:7. A copy submits five pieces of its 17 MiB
 * leaf, then its chunk: the first copy fails at its 4th piece, the second
 * (calls 5..) at its 3rd. */
static void submit_h2d(void) {
  batch b;
  make_batch(&b, 40, 17 << 20);
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyHtoDAsync failed", "CUDA_ERROR_ILLEGAL_ADDRESS",
                   "copy-submit call 4"));
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyHtoDAsync failed", "copy-submit call 7"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 1, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* Submissions of one device-to-host or device-to-device copy of 4 packed
 * leaves and one own leaf: one gather kernel (or, without kernels, one
 * copy per packed leaf), then one copy for the own leaf. */
static int packed_submits(void) { return mtc_has_kernels() ? 1 : 4; }

/* copy-submit:3,copy-submit:4+P. Setup submits 2; the first copy fails
 * at its packed leaves, the second at its own leaf. */
static void submit_d2h(void) {
  batch b;
  make_batch(&b, 4, 1 << 20);
  mtc_leaf dev[MAX_LEAVES];
  unsigned long long copies = fake.copy_count();
  mtc_plan *setup = on_device(&b, 0, dev);
  CHECK(fake.copy_count() - copies == 2); /* what the spec assumes */
  const char *packed =
      mtc_has_kernels() ? "cuLaunchKernel" : "cuMemcpyDtoHAsync failed";
  copy_fails(MTC_DEVICE_CPU, 0, dev, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS(packed, "CUDA_ERROR_ILLEGAL_ADDRESS", "copy-submit call 3"));
  copy_fails(MTC_DEVICE_CPU, 1, dev, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyDtoHAsync failed"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(MTC_DEVICE_CPU, 1, dev, b.count, b.data, out));
  mtc_plan_release(setup);
  free_batch(&b);
}

/* The same sums as submit_d2h, to cuda:1 (peer copies). */
static void submit_d2d(void) {
  batch b;
  make_batch(&b, 4, 1 << 20);
  mtc_leaf dev[MAX_LEAVES];
  mtc_plan *setup = on_device(&b, 0, dev);
  const char *packed =
      mtc_has_kernels() ? "cuLaunchKernel" : "cuMemcpyPeerAsync failed";
  copy_fails(1, 0, dev, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS(packed, "copy-submit call 3"));
  copy_fails(1, 1, dev, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyPeerAsync failed"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(1, 0, dev, b.count, b.data, out));
  mtc_plan_release(setup);
  free_batch(&b);
}

/* copy-submit:2+: the first copy goes through, every later one fails. */
static void submit_every(void) {
  batch b;
  make_batch(&b, 10, 0);
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyHtoDAsync failed", "copy-submit call 2"));
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuMemcpyHtoDAsync failed", "copy-submit call 3"));
  free_batch(&b);
}

/* event-query:1-2. Only waits that saw the copy complete count: the first
 * copy's mtc_plan_wait, then the second copy's successful poll. */
static void event_wait(void) {
  batch b;
  make_batch(&b, 20, 0);
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_CUDA, 0, 0,
             TEXTS("cuEventSynchronize failed", "CUDA_ERROR_LAUNCH_FAILED",
                   "event-query call 1"));
  copy_fails(0, 1, b.leaves, b.count, MTC_ERR_CUDA, 0, 1,
             TEXTS("cuEventQuery failed", "event-query call 2"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* event-query:1: the first wait of a staged 17 MiB leaf is the 4th piece
 * waiting for the ring's first buffer, in the middle of the submission. */
static void event_pieces(void) {
  batch b;
  make_batch(&b, 0, 17 << 20);
  copy_fails(0, 0, b.leaves, b.count, MTC_ERR_CUDA, 1, 0,
             TEXTS("cuEventSynchronize failed", "event-query call 1"));
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(0, 0, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* A malformed MTC_FAULT: every driver call fails with the reason; host
 * copies, which never load the driver, still work. */
static const char *malformed_reason;

static void malformed(void) {
  int32_t count = -1;
  CHECK_STATUS(mtc_cuda_device_count(&count), MTC_ERR_INVALID_ARGUMENT);
  char quoted[128];
  snprintf(quoted, sizeof quoted, "MTC_FAULT=\"%s\"", getenv("MTC_FAULT"));
  CHECK_CONTAINS(mtc_last_error(), quoted);
  CHECK_CONTAINS(mtc_last_error(), malformed_reason);
  mtc_plan *plan = (mtc_plan *)1;
  CHECK_STATUS(mtc_plan_create(0, NULL, &plan), MTC_ERR_INVALID_ARGUMENT);
  CHECK(plan == NULL);
  CHECK_CONTAINS(mtc_last_error(), malformed_reason);

  batch b;
  make_batch(&b, 5, 0);
  mtc_leaf_result out[MAX_LEAVES];
  mtc_plan_release(copy_ok(MTC_DEVICE_CPU, 0, b.leaves, b.count, b.data, out));
  free_batch(&b);
}

/* --------------------------------------------------------------- runner */

typedef struct scenario {
  const char *name;
  char fault[64];
  void (*run)(void);
  const char *reason; /* malformed specs: what the message must say */
} scenario;

static int run_child(const scenario *s, const char *driver) {
  setenv("MTC_FAULT", s->fault, 1);
  alarm(120); /* a hang fails the scenario instead of the whole run */
  void *handle = fake_open(driver);
  if (handle == NULL) return 1;
  FAKE_SYM(handle, fake.live_device_allocations,
           "fake_cuda_live_device_allocations");
  FAKE_SYM(handle, fake.copy_count, "fake_cuda_copy_count");
  FAKE_SYM(handle, fake.kernel_launches, "fake_cuda_kernel_launches");
  if (!fake.live_device_allocations || !fake.copy_count) {
    printf("%s is not the emulated driver\n", driver);
    return 1;
  }
  malformed_reason = s->reason;
  s->run();
  char suite[160];
  snprintf(suite, sizeof suite, "test_faults [%s, MTC_FAULT=%s]", s->name,
           s->fault);
  return check_summary(suite);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    printf("test_faults: pass the emulated driver's path\n");
    return 1;
  }
  setenv("MTC_CUDA_DRIVER", argv[1], 1);
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_DEVICE_MEMORY_BYTES", "256m", 1);
  setenv("MTC_STAGING_THREADS", "2", 0);

  int p = packed_submits();
  scenario scenarios[] = {
      {"pinned-alloc, host to device", "pinned-alloc:1-4", pinned_h2d, NULL},
      {"pinned-alloc, recovered by the retry", "pinned-alloc:1", pinned_recovered, NULL},
      {"pinned-alloc, device to host", "pinned-alloc:1-4", pinned_d2h, NULL},
      {"device-alloc, host to device", "device-alloc:2,device-alloc:4", device_h2d, NULL},
      {"device-alloc, device to device", "device-alloc:3,device-alloc:5", device_d2d, NULL},
      {"device-alloc, chosen CUresults", "device-alloc:1=ECC_UNCORRECTABLE,device-alloc:2=999",
       device_codes, NULL},
      {"copy-submit, host to device", "copy-submit:4,copy-submit:7", submit_h2d, NULL},
      {"copy-submit, device to host", "", submit_d2h, NULL},
      {"copy-submit, device to device", "", submit_d2d, NULL},
      {"copy-submit, every later call", "copy-submit:2+", submit_every, NULL},
      {"event-query, wait and poll", "event-query:1-2", event_wait, NULL},
      {"event-query, staging pieces", "event-query:1", event_pieces, NULL},
      {"malformed: no class", "bogus:1", malformed, "names no class"},
      {"malformed: no count", "copy-submit", malformed, "lacks \":N\""},
      {"malformed: call 0", "copy-submit:0", malformed, "no call number of 1 or more"},
      {"malformed: reversed range", "device-alloc:5-3", malformed, "ends its range before"},
      {"malformed: unknown CUresult", "event-query:1=NOPE", malformed, "names no CUresult"},
      {"malformed: success as a fault", "event-query:1=0", malformed, "no failure"},
      {"malformed: empty entry", "pinned-alloc:1,", malformed, "is empty"},
  };
  size_t count = sizeof scenarios / sizeof scenarios[0];
  for (size_t i = 0; i < count; i++) {
    if (scenarios[i].run == submit_d2h || scenarios[i].run == submit_d2d) {
      snprintf(scenarios[i].fault, sizeof scenarios[i].fault,
               "copy-submit:3,copy-submit:%d", 4 + p);
    }
  }

  int failed = 0;
  for (size_t i = 0; i < count; i++) {
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
      perror("fork");
      return 1;
    }
    if (child == 0) exit(run_child(&scenarios[i], argv[1]));
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      if (WIFSIGNALED(status)) {
        printf("test_faults [%s]: killed by signal %d\n", scenarios[i].name,
               WTERMSIG(status));
      }
    }
  }
  if (failed) {
    printf("test_faults: %d of %zu scenarios FAILED\n", failed, count);
    return 1;
  }
  printf("test_faults: all %zu scenarios passed\n", count);
  return 0;
}
