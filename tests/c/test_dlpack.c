/* test_dlpack.c — DLPack through the C ABI: blocks exported as managed
 * tensors, other libraries' tensors described as leaves, the deleter's
 * block reference, round trips, and every rejection. Against the emulated
 * driver (path in argv[1] or MTC_CUDA_DRIVER), or given libcuda.so.1, a
 * real GPU: values are read back through copies, never in place.
 *
 * Built twice: as is, and with MTC_TEST_DLPACK_HEADER_FIRST, where the
 * declarations of dlpack.h come first (the official header's include guard
 * and layout, and no typedef of the managed tensor, as in its C form) and
 * mtc.h must step aside. */
#ifdef MTC_TEST_DLPACK_HEADER_FIRST
#include <stdint.h>
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10 } DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3,
               kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 } DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
};
#endif

#include <stdlib.h>

#include "check.h"
#include "helpers.h"

#define SUITE "test_dlpack"

static int32_t device_count;

_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLPack 1.x layout");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "DLPack 1.x layout");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor layout");

static uint64_t blocks_live(void) {
  mtc_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(mtc_get_stats(&stats));
  return stats.blocks_live;
}

/* Copies leaves to target; the plan (released by the caller) holds the results. */
static mtc_plan *copy_to(int32_t target, const mtc_leaf *leaves, uint64_t n,
                         mtc_leaf_result *out) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(target, NULL, &plan));
  if (plan == NULL) return NULL;
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, n));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, n, out));
  return plan;
}

/* True when the leaf (any device) holds exactly `want`: read back through
 * a copy to the host. */
static int holds(const mtc_leaf *leaf, const void *want, uint64_t bytes) {
  mtc_leaf_result back;
  mtc_plan *plan = copy_to(MTC_DEVICE_CPU, leaf, 1, &back);
  int same = plan != NULL && back.device == MTC_DEVICE_CPU &&
             memcmp((const void *)(uintptr_t)back.address, want, (size_t)bytes) == 0;
  mtc_plan_release(plan);
  return same;
}

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType I64 = {kDLInt, 64, 1};
static const DLDataType BOOL8 = {kDLBool, 8, 1};
static const DLDataType F16 = {kDLFloat, 16, 1};

/* Three tensors packed into one device block, exported, checked field by
 * field, imported back, copied on, and released one deleter at a time. */
static void test_export_device(void) {
  float boxes[6][4];
  int64_t ids[6];
  uint8_t active[6];
  for (int i = 0; i < 6; i++) {
    for (int j = 0; j < 4; j++) boxes[i][j] = (float)(i * 10 + j) + 0.25f;
    ids[i] = (int64_t)1 << (40 + i);
    active[i] = (uint8_t)(i % 2);
  }
  const uint64_t before = blocks_live();
  mtc_leaf leaves[3] = {make_leaf(host_address(boxes), sizeof boxes, 4, MTC_DEVICE_CPU),
                        make_leaf(host_address(ids), sizeof ids, 8, MTC_DEVICE_CPU),
                        make_leaf(host_address(active), sizeof active, 1, MTC_DEVICE_CPU)};
  mtc_leaf_result on_gpu[3];
  mtc_plan *plan = copy_to(0, leaves, 3, on_gpu);
  CHECK(on_gpu[0].block != NULL && on_gpu[0].block == on_gpu[1].block &&
        on_gpu[1].block == on_gpu[2].block); /* packed: one block */

  const int64_t shapes[3][2] = {{6, 4}, {6, 0}, {2, 3}};
  const int32_t ndims[3] = {2, 1, 2};
  const DLDataType dtypes[3] = {F32, I64, BOOL8};
  DLManagedTensorVersioned *t[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    CHECK_OK(mtc_block_to_dlpack(on_gpu[i].block, on_gpu[i].offset, shapes[i],
                                 ndims[i], &dtypes[i], 0, &t[i]));
  }
  mtc_plan_release(plan); /* the tensors hold the block now */
  CHECK_EQ_U64(blocks_live(), before + 1);
  if (t[0] == NULL || t[1] == NULL || t[2] == NULL) return;

  const DLTensor *x = &t[0]->dl_tensor;
  CHECK(t[0]->version.major == 1 && t[0]->version.minor == 1);
  CHECK(t[0]->deleter != NULL && t[0]->manager_ctx != NULL);
  CHECK_EQ_U64(t[0]->flags, 0);
  CHECK(x->device.device_type == kDLCUDA && x->device.device_id == 0);
  CHECK_EQ_U64((uint64_t)(uintptr_t)x->data, on_gpu[0].address);
  CHECK_EQ_U64(x->byte_offset, 0);
  CHECK(x->ndim == 2 && x->shape[0] == 6 && x->shape[1] == 4);
  CHECK(x->strides != NULL && x->strides[0] == 4 && x->strides[1] == 1);
  CHECK(x->dtype.code == kDLFloat && x->dtype.bits == 32 && x->dtype.lanes == 1);
  CHECK(t[1]->dl_tensor.ndim == 1 && t[1]->dl_tensor.shape[0] == 6);
  CHECK(t[2]->dl_tensor.dtype.code == kDLBool);

  /* Import: the same memory, as leaves, copied to the host and back. */
  mtc_leaf imported[3];
  for (int i = 0; i < 3; i++) {
    CHECK_OK(mtc_leaf_from_dlpack(t[i], &imported[i]));
    CHECK_EQ_U64(imported[i].address, on_gpu[i].address);
    CHECK_EQ_U64(imported[i].bytes, leaves[i].bytes);
    CHECK(imported[i].device == 0);
    CHECK_EQ_U64(imported[i].element_size, leaves[i].element_size);
    CHECK_EQ_U64(imported[i].row_count, 0);
  }
  CHECK(holds(&imported[0], boxes, sizeof boxes));
  CHECK(holds(&imported[1], ids, sizeof ids));
  CHECK(holds(&imported[2], active, sizeof active));
  if (device_count > 1) { /* imported leaves as sources of a device copy */
    mtc_leaf_result on_gpu1[3];
    mtc_plan *second = copy_to(1, imported, 3, on_gpu1);
    mtc_leaf again = make_leaf(on_gpu1[1].address, sizeof ids, 8, 1);
    CHECK(on_gpu1[1].device == 1);
    CHECK(holds(&again, ids, sizeof ids));
    mtc_plan_release(second);
  }

  /* Each deleter drops one reference; the last one frees the block. */
  t[1]->deleter(t[1]);
  t[0]->deleter(t[0]);
  CHECK_EQ_U64(blocks_live(), before + 1);
  mtc_dlpack_delete(t[2]);
  CHECK_EQ_U64(blocks_live(), before);
}

/* A scalar (ndim 0) and an empty tensor at the block's end. */
static void test_export_shapes(void) {
  double value = 2.5;
  mtc_leaf leaf = make_leaf(host_address(&value), sizeof value, 8, MTC_DEVICE_CPU);
  mtc_leaf_result r;
  mtc_plan *plan = copy_to(0, &leaf, 1, &r);
  const DLDataType f64 = {kDLFloat, 64, 1};
  DLManagedTensorVersioned *scalar = NULL, *empty = NULL;
  CHECK_OK(mtc_block_to_dlpack(r.block, r.offset, NULL, 0, &f64, 0, &scalar));
  const int64_t none[2] = {0, 3};
  CHECK_OK(mtc_block_to_dlpack(r.block, r.offset + 8, none, 2, &f64, 0, &empty));
  mtc_plan_release(plan);
  if (scalar != NULL) {
    CHECK(scalar->dl_tensor.ndim == 0 && scalar->dl_tensor.shape == NULL &&
          scalar->dl_tensor.strides == NULL);
    mtc_leaf back;
    CHECK_OK(mtc_leaf_from_dlpack(scalar, &back));
    CHECK_EQ_U64(back.bytes, 8);
    CHECK(holds(&back, &value, sizeof value));
  }
  if (empty != NULL) {
    mtc_leaf back;
    CHECK_OK(mtc_leaf_from_dlpack(empty, &back));
    CHECK_EQ_U64(back.bytes, 0);
    CHECK_EQ_U64(back.address, 0);
  }
  mtc_dlpack_delete(scalar);
  mtc_dlpack_delete(empty);
}

/* Host outputs of copies to the host are pinned blocks: kDLCPU by default,
 * kDLCUDAHost on request, readable in place. */
static void test_export_pinned(void) {
  int16_t values[5] = {-3, 7, 11, 1000, -32768};
  mtc_leaf leaf = make_leaf(host_address(values), sizeof values, 2, MTC_DEVICE_CPU);
  mtc_leaf_result on_gpu, on_host;
  mtc_plan *up = copy_to(0, &leaf, 1, &on_gpu);
  mtc_leaf down_leaf = make_leaf(on_gpu.address, sizeof values, 2, 0);
  mtc_plan *down = copy_to(MTC_DEVICE_CPU, &down_leaf, 1, &on_host);
  mtc_plan_release(up);
  const int64_t shape[1] = {5};
  const DLDataType i16 = {kDLInt, 16, 1};
  DLManagedTensorVersioned *cpu = NULL, *pinned = NULL;
  CHECK_OK(mtc_block_to_dlpack(on_host.block, on_host.offset, shape, 1, &i16, 0, &cpu));
  CHECK_OK(mtc_block_to_dlpack(on_host.block, on_host.offset, shape, 1, &i16,
                               MTC_DLPACK_PINNED_AS_CUDA_HOST, &pinned));
  mtc_plan_release(down);
  if (cpu == NULL || pinned == NULL) return;
  CHECK(cpu->dl_tensor.device.device_type == kDLCPU);
  CHECK(pinned->dl_tensor.device.device_type == kDLCUDAHost);
  CHECK(memcmp(cpu->dl_tensor.data, values, sizeof values) == 0);
  mtc_leaf back;
  CHECK_OK(mtc_leaf_from_dlpack(pinned, &back));
  CHECK(back.device == MTC_DEVICE_CPU);
  CHECK_EQ_U64(back.address, (uint64_t)(uintptr_t)pinned->dl_tensor.data);
  mtc_dlpack_delete(cpu);
  mtc_dlpack_delete(pinned);
}

/* A tensor made by "another library": host memory it owns, a deleter that
 * counts its calls. */
static int foreign_deletes;

static void foreign_deleter(DLManagedTensorVersioned *self) {
  foreign_deletes++;
  self->dl_tensor.data = NULL;
}

static DLManagedTensorVersioned foreign(void *data, DLDeviceType type,
                                        int64_t *shape, int64_t *strides,
                                        int32_t ndim, DLDataType dtype) {
  DLManagedTensorVersioned t;
  memset(&t, 0, sizeof t);
  t.version.major = 1;
  t.version.minor = 0;
  t.deleter = foreign_deleter;
  t.dl_tensor.data = data;
  t.dl_tensor.device.device_type = type;
  t.dl_tensor.ndim = ndim;
  t.dl_tensor.dtype = dtype;
  t.dl_tensor.shape = shape;
  t.dl_tensor.strides = strides;
  return t;
}

static void test_import_host(void) {
  float grid[8][8];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) grid[i][j] = (float)(i * 8 + j);

  /* Dense, strides NULL, with byte_offset: rows 2.. of the grid. */
  int64_t shape[2] = {6, 8};
  DLManagedTensorVersioned dense = foreign(grid, kDLCPU, shape, NULL, 2, F32);
  dense.dl_tensor.byte_offset = 2 * sizeof grid[0];
  mtc_leaf leaf;
  CHECK_OK(mtc_leaf_from_dlpack(&dense, &leaf));
  CHECK_EQ_U64(leaf.address, (uint64_t)(uintptr_t)&grid[2][0]);
  CHECK_EQ_U64(leaf.bytes, 6 * 8 * 4);
  CHECK(leaf.device == MTC_DEVICE_CPU);
  CHECK(holds(&leaf, &grid[2][0], leaf.bytes));
  mtc_leaf_result on_gpu;
  mtc_plan *plan = copy_to(0, &leaf, 1, &on_gpu);
  mtc_leaf there = make_leaf(on_gpu.address, leaf.bytes, 4, 0);
  CHECK(holds(&there, &grid[2][0], leaf.bytes));
  mtc_plan_release(plan);

  /* x[:, 1:4]: rows of 3 contiguous floats, 8 apart: a row leaf. */
  int64_t cols_shape[2] = {8, 3}, cols_strides[2] = {8, 1};
  DLManagedTensorVersioned cols = foreign(&grid[0][1], kDLCUDAHost, cols_shape,
                                          cols_strides, 2, F32);
  CHECK_OK(mtc_leaf_from_dlpack(&cols, &leaf));
  CHECK_EQ_U64(leaf.row_count, 8);
  CHECK_EQ_U64(leaf.row_pitch, 32);
  CHECK_EQ_U64(leaf.bytes, 8 * 3 * 4);
  float want[8][3];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 3; j++) want[i][j] = grid[i][j + 1];
  mtc_leaf_result gathered;
  plan = copy_to(0, &leaf, 1, &gathered);
  there = make_leaf(gathered.address, sizeof want, 4, 0);
  CHECK(holds(&there, want, sizeof want));
  mtc_plan_release(plan);

  /* Extent-1 dimensions may have any stride; [4, 1, 3] is still dense. */
  int64_t odd_shape[3] = {4, 1, 3}, odd_strides[3] = {3, 99, 1};
  DLManagedTensorVersioned odd = foreign(grid, kDLCPU, odd_shape, odd_strides, 3, F32);
  CHECK_OK(mtc_leaf_from_dlpack(&odd, &leaf));
  CHECK_EQ_U64(leaf.row_count, 0);
  CHECK_EQ_U64(leaf.bytes, 48);

  /* libmtc never calls an imported tensor's deleter; mtc_dlpack_delete does, once. */
  CHECK(foreign_deletes == 0);
  mtc_dlpack_delete(&dense);
  CHECK(foreign_deletes == 1 && dense.dl_tensor.data == NULL);
  mtc_dlpack_delete(NULL);
  cols.deleter = NULL;
  mtc_dlpack_delete(&cols);
  CHECK(foreign_deletes == 1);
}

static void expect_export_error(mtc_block *block, uint64_t offset,
                                const int64_t *shape, int32_t ndim,
                                const DLDataType *dtype, uint32_t flags,
                                const char *text) {
  DLManagedTensorVersioned *out = (DLManagedTensorVersioned *)&out;
  CHECK_STATUS(mtc_block_to_dlpack(block, offset, shape, ndim, dtype, flags, &out),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK(out == NULL);
  CHECK_CONTAINS(mtc_last_error(), text);
}

static void test_export_errors(void) {
  float data[16] = {0};
  mtc_leaf leaf = make_leaf(host_address(data), sizeof data, 4, MTC_DEVICE_CPU);
  mtc_leaf_result r;
  mtc_plan *plan = copy_to(0, &leaf, 1, &r);
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(r.block, &info));
  const uint64_t before = blocks_live();
  const int64_t shape[2] = {4, 4};
  const int64_t negative[2] = {4, -1};
  const int64_t huge[2] = {INT64_MAX, 4};
  const int64_t too_big[1] = {(int64_t)(info.bytes / 4) + 1};
  const DLDataType lanes = {kDLFloat, 32, 4}, twelve = {kDLInt, 12, 1},
                   opaque = {kDLOpaqueHandle, 64, 1}, bool16 = {kDLBool, 16, 1};

  expect_export_error(NULL, 0, shape, 2, &F32, 0, "must not be NULL");
  expect_export_error(r.block, 0, shape, 2, NULL, 0, "must not be NULL");
  CHECK_STATUS(mtc_block_to_dlpack(r.block, 0, shape, 2, &F32, 0, NULL),
               MTC_ERR_INVALID_ARGUMENT);
  expect_export_error(r.block, 0, shape, -1, &F32, 0, "ndim is -1");
  expect_export_error(r.block, 0, shape, 33, &F32, 0, "ndim is 33; it must be 0..32");
  expect_export_error(r.block, 0, NULL, 2, &F32, 0, "shape is NULL but ndim is 2");
  expect_export_error(r.block, 0, negative, 2, &F32, 0, "shape[1] is -1");
  expect_export_error(r.block, 0, huge, 2, &F32, 0, "more bytes than memory can");
  expect_export_error(r.block, 0, shape, 2, &lanes, 0, "lanes 4");
  expect_export_error(r.block, 0, shape, 2, &twelve, 0, "dtype int (code 0, bits 12");
  expect_export_error(r.block, 0, shape, 2, &opaque, 0, "opaque handle");
  expect_export_error(r.block, 0, shape, 2, &bool16, 0, "dtype bool (code 6, bits 16");
  expect_export_error(r.block, 0, too_big, 1, &F32, 0, "do not fit in the block");
  expect_export_error(r.block, info.bytes + 4, NULL, 0, &F32, 0, "do not fit");
  expect_export_error(r.block, 2, shape, 1, &F32, 0, "offset 2 does not start a 4-byte element");
  expect_export_error(r.block, 1, shape, 1, &F16, 0, "offset 1 does not start a 2-byte element");
  expect_export_error(r.block, 0, shape, 2, &F32, 8, "unknown flags 0x8");
  CHECK_EQ_U64(blocks_live(), before); /* no reference taken on failure */
  mtc_plan_release(plan);
}

static void expect_import_error(const DLManagedTensorVersioned *t,
                                mtc_status status, const char *text) {
  mtc_leaf leaf;
  CHECK_STATUS(mtc_leaf_from_dlpack(t, &leaf), status);
  CHECK_CONTAINS(mtc_last_error(), text);
}

static void test_import_errors(void) {
  float data[64] = {0};
  int64_t shape[2] = {4, 4}, transposed[2] = {1, 4}, wide[2] = {8, 2},
          broadcast[2] = {0, 1}, negative[2] = {-4, 1}, bad_extent[2] = {4, -4};
  DLManagedTensorVersioned t = foreign(data, kDLCPU, shape, NULL, 2, F32);
  mtc_leaf leaf;
  CHECK_STATUS(mtc_leaf_from_dlpack(NULL, &leaf), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_leaf_from_dlpack(&t, NULL), MTC_ERR_INVALID_ARGUMENT);

  t.version.major = 2;
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "the tensor is DLPack 2.0; libmtc reads 1.x");
  t = foreign(data, kDLROCM, shape, NULL, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "device type 10 is not one libmtc copies");
  t = foreign(data, kDLCUDA, shape, NULL, 2, F32);
  t.dl_tensor.device.device_id = -1;
  expect_import_error(&t, MTC_ERR_INVALID_ARGUMENT, "kDLCUDA device_id is -1");
  t = foreign(data, kDLCPU, shape, NULL, 40, F32);
  expect_import_error(&t, MTC_ERR_INVALID_ARGUMENT, "ndim is 40");
  t = foreign(data, kDLCPU, NULL, NULL, 2, F32);
  expect_import_error(&t, MTC_ERR_INVALID_ARGUMENT, "shape is NULL");
  t = foreign(data, kDLCPU, bad_extent, NULL, 2, F32);
  expect_import_error(&t, MTC_ERR_INVALID_ARGUMENT, "shape[1] is -4");
  t = foreign(NULL, kDLCPU, shape, NULL, 2, F32);
  expect_import_error(&t, MTC_ERR_INVALID_ARGUMENT, "data is NULL but the tensor holds 64 bytes");
  const DLDataType lanes = {kDLFloat, 32, 2}, f8bits16 = {kDLBfloat, 32, 1};
  t = foreign(data, kDLCPU, shape, NULL, 2, lanes);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "lanes 2");
  t = foreign(data, kDLCPU, shape, NULL, 2, f8bits16);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "dtype bfloat (code 4, bits 32");

  /* Layouts: a transpose, two strided dimensions, overlap, negative steps. */
  t = foreign(data, kDLCPU, shape, transposed, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED,
                      "strides [1, 4] of shape [4, 4] are not row-major contiguous (that would be [4, 1])");
  t = foreign(data, kDLCPU, shape, wide, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "nor rows of contiguous elements");
  t = foreign(data, kDLCPU, shape, broadcast, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "strides [0, 1]");
  t = foreign(data, kDLCPU, shape, negative, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "strides [-4, 1]");
  /* Rows are a host layout: device tensors must be dense. */
  int64_t rows[2] = {8, 1};
  t = foreign(data, kDLCUDA, shape, rows, 2, F32);
  expect_import_error(&t, MTC_ERR_UNSUPPORTED, "(device tensors must be)");
  t = foreign(data, kDLCPU, shape, rows, 2, F32);
  CHECK_OK(mtc_leaf_from_dlpack(&t, &leaf));
  CHECK_EQ_U64(leaf.row_count, 4);
  CHECK(foreign_deletes == 1); /* still only the one of test_import_host */
}

int main(int argc, char **argv) {
  if (driver_argument(argc, argv, SUITE) == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("MTC_STAGING_THREADS", "2", 0);
  CHECK_OK(mtc_cuda_device_count(&device_count));
  if (device_count < 1) return check_summary(SUITE);
  const uint64_t start = blocks_live();
  test_export_device();
  test_export_shapes();
  test_export_pinned();
  test_import_host();
  test_export_errors();
  test_import_errors();
  CHECK_EQ_U64(blocks_live(), start);
  return check_summary(SUITE);
}
