/* copy_batch.c — embedding libmtc from C, with nothing but mtc.h.
 *
 * Builds a small nested batch (2 samples, each with 2 cameras and ground
 * truth: float32, int64 and bool arrays, and one strided slice), copies it
 * to cuda:0 in one plan when a CUDA device exists, else to the host, waits,
 * checks every value (reading device results back through a second plan),
 * hands one result over as a DLPack tensor, and releases everything.
 * Exits 0 when every check passed.
 *
 *   zig build examples && zig-out/bin/copy_batch
 *   MTC_CUDA_DRIVER=zig-out/lib/libfakecuda.so zig-out/bin/copy_batch   # emulated GPUs
 *
 * MTC_REQUIRE_GPU=1 makes the absence of a CUDA device an error. Any C11
 * compiler builds it against the built library, from the repository root:
 *
 *   cc -std=c11 examples/c/copy_batch.c -Ilib/include -Lzig-out/lib -lmtc \
 *      -Wl,-rpath,"$PWD/zig-out/lib" -o copy_batch
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtc.h"

enum { SAMPLES = 2, CAMERAS = 2, LEAVES_PER_CAMERA = 5, GT_LEAVES = 3 };
enum { MAX_LEAVES = SAMPLES * (CAMERAS * LEAVES_PER_CAMERA + GT_LEAVES) };

/* One tensor of the batch: its path (for messages), its memory and how to
 * copy it. Strided leaves list rows; `dense` is what their copy must hold. */
typedef struct named_leaf {
  char path[64];
  mtc_leaf leaf;
  const void *dense;
} named_leaf;

static named_leaf leaves[MAX_LEAVES];
static int leaf_count;
static void *allocations[MAX_LEAVES * 2];
static int allocation_count;

static void *filled(size_t bytes, unsigned seed) {
  unsigned char *p = malloc(bytes ? bytes : 1);
  for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(seed * 31u + i * 7u);
  allocations[allocation_count++] = p;
  return p;
}

static void add(const char *path, const void *data, uint64_t bytes,
                uint32_t element_size) {
  named_leaf *n = &leaves[leaf_count++];
  snprintf(n->path, sizeof n->path, "%s", path);
  memset(&n->leaf, 0, sizeof n->leaf);
  n->leaf.address = (uint64_t)(uintptr_t)data;
  n->leaf.bytes = bytes;
  n->leaf.device = MTC_DEVICE_CPU;
  n->leaf.element_size = element_size;
  n->dense = data;
}

static void build_batch(void) {
  char path[64];
  for (int s = 0; s < SAMPLES; s++) {
    for (int c = 0; c < CAMERAS; c++) {
      const int n = 10 + 20 * s + 5 * c; /* visible objects */
      const unsigned seed = (unsigned)(s * 10 + c);
#define CAM(name) (snprintf(path, sizeof path, "batch[%d].cams_gt[%d]." name, s, c), path)
      add(CAM("bounding_boxes"), filled((size_t)n * 4 * 4, seed), (uint64_t)n * 16, 4);
      add(CAM("class_ids"), filled((size_t)n * 8, seed + 1), (uint64_t)n * 8, 8);
      unsigned char *active = filled((size_t)n, seed + 2);
      for (int i = 0; i < n; i++) active[i] &= 1; /* bool */
      add(CAM("active"), active, (uint64_t)n, 1);
      add(CAM("depths"), filled((size_t)n * 4, seed + 3), (uint64_t)n * 4, 4);
      /* proj_mat [3, 4]: the left half of a [3, 8] float32 matrix, so three
       * rows of 16 bytes, 32 bytes apart. */
      const float *wide = filled(3 * 8 * 4, seed + 4);
      float *dense = filled(3 * 4 * 4, 0);
      for (int r = 0; r < 3; r++) memcpy(dense + r * 4, wide + r * 8, 16);
      add(CAM("proj_mat"), wide, 3 * 16, 4);
      leaves[leaf_count - 1].leaf.row_count = 3;
      leaves[leaf_count - 1].leaf.row_pitch = 32;
      leaves[leaf_count - 1].dense = dense;
#undef CAM
    }
    const int objects = 60 + 40 * s;
#define GT(name) (snprintf(path, sizeof path, "batch[%d].gt_data." name, s), path)
    add(GT("bounding_boxes_3d"), filled((size_t)objects * 7 * 4, 100u + (unsigned)s), (uint64_t)objects * 28, 4);
    add(GT("class_ids"), filled((size_t)objects * 8, 200u + (unsigned)s), (uint64_t)objects * 8, 8);
    unsigned char *gt_active = filled((size_t)objects, 300u + (unsigned)s);
    for (int i = 0; i < objects; i++) gt_active[i] &= 1;
    add(GT("active"), gt_active, (uint64_t)objects, 1);
#undef GT
  }
}

static int failures;

static void expect(int ok, const char *what, const char *detail) {
  if (!ok) {
    failures++;
    fflush(stdout);
    fprintf(stderr, "copy_batch: FAILED: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  }
}

/* Runs one plan over `in` to `target`; results into out. NULL on failure. */
static mtc_plan *run_plan(int32_t target, const mtc_leaf *in, uint64_t count,
                          mtc_leaf_result *out, uint64_t *polls) {
  mtc_options options = MTC_OPTIONS_INIT;
  mtc_plan *plan = NULL;
  if (mtc_plan_create(target, &options, &plan) != MTC_OK) {
    expect(0, "mtc_plan_create", mtc_last_error());
    return NULL;
  }
  /* All leaves in one call; on error the plan names the bad one. */
  if (mtc_plan_add_leaves(plan, in, count) != MTC_OK) {
    const int64_t bad = mtc_plan_error_leaf(plan);
    fprintf(stderr, "copy_batch: %s: %s\n", bad >= 0 ? leaves[bad].path : "(batch)",
            mtc_plan_last_error(plan));
    expect(0, "mtc_plan_add_leaves", NULL);
    mtc_plan_release(plan);
    return NULL;
  }
  mtc_status status = mtc_plan_submit(plan); /* returns at once */
  uint64_t n = 0;
  if (status == MTC_OK) {
    while ((status = mtc_plan_poll(plan)) == MTC_IN_PROGRESS) n++; /* other work goes here */
  }
  if (polls) *polls = n;
  if (status == MTC_OK) status = mtc_plan_wait(plan); /* done already: returns at once */
  if (status == MTC_OK) status = mtc_plan_results(plan, 0, count, out);
  if (status != MTC_OK) {
    expect(0, mtc_status_name(status), mtc_plan_last_error(plan));
    mtc_plan_release(plan);
    return NULL;
  }
  return plan;
}

/* Compares every result with the dense bytes it must hold: in place for
 * host results; through a copy back to the host for device results. */
static void check_values(const mtc_leaf_result *results) {
  mtc_leaf_result host[MAX_LEAVES];
  mtc_plan *back = NULL;
  if (results[0].device != MTC_DEVICE_CPU) {
    mtc_leaf from_device[MAX_LEAVES];
    for (int i = 0; i < leaf_count; i++) {
      memset(&from_device[i], 0, sizeof from_device[i]);
      from_device[i].address = results[i].address;
      from_device[i].bytes = leaves[i].leaf.bytes;
      from_device[i].device = results[i].device;
      from_device[i].element_size = leaves[i].leaf.element_size;
    }
    back = run_plan(MTC_DEVICE_CPU, from_device, (uint64_t)leaf_count, host, NULL);
    if (back == NULL) return;
    results = host;
  }
  for (int i = 0; i < leaf_count; i++) {
    const void *got = (const void *)(uintptr_t)results[i].address;
    expect(memcmp(got, leaves[i].dense, (size_t)leaves[i].leaf.bytes) == 0,
           "values differ", leaves[i].path);
  }
  mtc_plan_release(back);
}

/* Hands result i over as a DLPack tensor (what a PyTorch or CuPy binding
 * would receive), reads it back as a leaf, and lets it go. */
static void hand_over(const mtc_leaf_result *results) {
  int i = 0;
  while (i < leaf_count && results[i].block == NULL) i++; /* reused leaves have no block */
  if (i == leaf_count) return;
  /* The first with a block: bounding_boxes (device) or proj_mat (host), rows of 4 floats. */
  const int64_t shape[2] = {(int64_t)(leaves[i].leaf.bytes / 16), 4};
  const DLDataType float32 = {kDLFloat, 32, 1};
  DLManagedTensorVersioned *tensor = NULL;
  if (mtc_block_to_dlpack(results[i].block, results[i].offset, shape, 2, &float32, 0, &tensor) != MTC_OK) {
    expect(0, "mtc_block_to_dlpack", mtc_last_error());
    return;
  }
  mtc_leaf again;
  expect(mtc_leaf_from_dlpack(tensor, &again) == MTC_OK, "mtc_leaf_from_dlpack", mtc_last_error());
  expect(again.address == results[i].address && again.bytes == leaves[i].leaf.bytes,
         "the DLPack tensor describes the result", leaves[i].path);
  printf("DLPack: %s as a float32 tensor [%" PRId64 ", %" PRId64 "] on %s:%d\n", leaves[i].path,
         tensor->dl_tensor.shape[0], tensor->dl_tensor.shape[1],
         tensor->dl_tensor.device.device_type == kDLCUDA ? "kDLCUDA" : "kDLCPU",
         (int)tensor->dl_tensor.device.device_id);
  tensor->deleter(tensor); /* the consumer's job once done; drops its block reference */
}

static uint64_t blocks_live(void) {
  mtc_stats stats = {0};
  stats.struct_size = sizeof stats;
  return mtc_get_stats(&stats) == MTC_OK ? stats.blocks_live : UINT64_MAX;
}

int main(void) {
  /* The rule of docs/VERSIONING.md: the same major, and before 1.0 the same
   * minor, as the mtc.h this was compiled with. */
  const uint32_t loaded = mtc_version_number();
  if (loaded / 10000 != MTC_VERSION_MAJOR ||
      (MTC_VERSION_MAJOR == 0 && loaded / 100 % 100 != MTC_VERSION_MINOR)) {
    fprintf(stderr, "copy_batch: built for libmtc %d.%d, loaded %s\n", MTC_VERSION_MAJOR,
            MTC_VERSION_MINOR, mtc_version_string());
    return 1;
  }
  int32_t devices = 0;
  const mtc_status found = mtc_cuda_device_count(&devices);
  const int32_t target = found == MTC_OK && devices > 0 ? 0 : MTC_DEVICE_CPU;
  if (target == MTC_DEVICE_CPU) {
    const char *why = found == MTC_OK ? "none found" : mtc_last_error();
    const char *require = getenv("MTC_REQUIRE_GPU");
    if (require != NULL && strcmp(require, "1") == 0) {
      fprintf(stderr, "copy_batch: MTC_REQUIRE_GPU=1 but no CUDA device (%s)\n", why);
      return 1;
    }
    printf("no CUDA device (%s): copying to the host\n", why);
  }
  const uint64_t blocks_before = blocks_live();

  build_batch();
  mtc_leaf in[MAX_LEAVES];
  uint64_t bytes = 0;
  for (int i = 0; i < leaf_count; i++) {
    in[i] = leaves[i].leaf;
    bytes += in[i].bytes;
  }
  mtc_leaf_result results[MAX_LEAVES];
  uint64_t polls = 0;
  mtc_plan *plan = run_plan(target, in, (uint64_t)leaf_count, results, &polls);
  if (plan != NULL) {
    mtc_plan_stats stats = {0};
    stats.struct_size = sizeof stats;
    mtc_plan_get_stats(plan, &stats);
    printf("libmtc %s: %d leaves, %" PRIu64 " bytes to %s%s: %" PRIu64 " chunks, %" PRIu64
           " copied, %" PRIu64 " reused, %" PRIu64 " polls while it ran\n",
           mtc_version_string(), leaf_count, bytes, target == MTC_DEVICE_CPU ? "cpu" : "cuda:",
           target == MTC_DEVICE_CPU ? "" : "0", stats.chunks, stats.leaves - stats.leaves_reused,
           stats.leaves_reused, polls);
    for (int i = 0; i < leaf_count; i++) {
      expect(results[i].device == target, "result on the target", leaves[i].path);
    }
    check_values(results);
    hand_over(results);
    mtc_plan_release(plan); /* frees the outputs: nothing retained them */
  }

  for (int i = 0; i < allocation_count; i++) free(allocations[i]);
  expect(blocks_live() == blocks_before, "every block released", NULL);
  if (failures) return 1;
  printf("copy_batch: ok (%d leaves checked on %s)\n", leaf_count, target == MTC_DEVICE_CPU ? "cpu" : "cuda:0");
  return 0;
}
