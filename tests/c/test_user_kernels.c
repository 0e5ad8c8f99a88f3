/* test_user_kernels.c — mtc_device_block_alloc, and modules and launches of
 * a caller's own kernels (mtc_module_*, mtc_kernel_launch,
 * mtc_launches_settle), against the emulated driver (path in argv[1] or
 * MTC_CUDA_DRIVER) with two devices: what reaches the driver is read back
 * through its test exports (fake_cuda_last_launch), device memory through
 * its addresses (it is host memory there). */
#include <stdlib.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"
#include "mtc.h"

static struct {
  void (*set_copy_delay_us)(unsigned long long us);
  int (*last_launch)(unsigned *dims, unsigned char *params, unsigned capacity);
  unsigned long long (*last_launch_stream)(void);
  int (*live_device_allocations)(void);
  int (*live_modules)(void);
} fake;

static const char ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry add_one_f32(.param .u64 p, .param .u32 n) { ret; }\n"
    ".visible .entry scalars(.param .s32 a, .param .u32 b, .param .s64 c, "
    ".param .f32 d, .param .f64 e, .param .u64 f) { ret; }\n";

static uint64_t block_address(mtc_block *block) {
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(block, &info));
  return info.address;
}

static int contains(const char *text, const char *part) {
  return strstr(text, part) != NULL;
}

static void test_alloc(void) {
  uint64_t live = checked_stats().blocks_live;
  mtc_block *plain = NULL, *zeroed = NULL, *none = (mtc_block *)1;
  CHECK_OK(mtc_device_block_alloc(0, 1000, 0, &plain));
  CHECK_OK(mtc_device_block_alloc(1, 1000, MTC_ALLOC_ZERO, &zeroed));
  CHECK(plain != NULL && zeroed != NULL);
  if (plain == NULL || zeroed == NULL) return;
  CHECK(checked_stats().blocks_live == live + 2);
  CHECK(checked_stats().device_bytes_live >= 2000);
  /* New emulated memory reads 0xCD; MTC_ALLOC_ZERO zeroed all of it. */
  const unsigned char *p = (const unsigned char *)(uintptr_t)block_address(plain);
  const unsigned char *z = (const unsigned char *)(uintptr_t)block_address(zeroed);
  CHECK(p[0] == 0xCD && p[999] == 0xCD);
  int zeros = 1;
  for (int i = 0; i < 1000; i++) zeros &= z[i] == 0;
  CHECK(zeros);
  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_OK(mtc_block_get_info(zeroed, &info));
  CHECK(info.device == 1 && info.bytes == 1000 && !info.pinned);
  mtc_block_release(plain);
  mtc_block_release(zeroed);
  CHECK(checked_stats().blocks_live == live);

  CHECK_OK(mtc_device_block_alloc(0, 0, MTC_ALLOC_ZERO, &none));
  CHECK(none == NULL);
  CHECK_STATUS(mtc_device_block_alloc(-1, 8, 0, &none), MTC_ERR_INVALID_ARGUMENT);
  CHECK(contains(mtc_last_error(), "device -1"));
  CHECK_STATUS(mtc_device_block_alloc(0, 8, 2, &none), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_device_block_alloc(5, 8, 0, &none), MTC_ERR_NO_DEVICE);
  CHECK_STATUS(mtc_device_block_alloc(0, 8, 0, NULL), MTC_ERR_INVALID_ARGUMENT);
  /* 256 MiB a device in this test. */
  CHECK_STATUS(mtc_device_block_alloc(0, 1ull << 30, MTC_ALLOC_ZERO, &none),
               MTC_ERR_OUT_OF_MEMORY);
  CHECK(none == NULL);
  CHECK(contains(mtc_last_error(), "1073741824 bytes on cuda:0") &&
        contains(mtc_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(checked_stats().blocks_live == live);
}

static void test_modules(void) {
  mtc_module *m = NULL;
  CHECK_STATUS(mtc_module_load(0, "garbage", 7, &m), MTC_ERR_CUDA);
  CHECK(m == NULL);
  CHECK(contains(mtc_last_error(), "CUDA_ERROR_INVALID_IMAGE") &&
        contains(mtc_last_error(), "cuda:0"));
  /* The JIT compiler's log follows the driver's error. */
  static const char too_new[] = ".version 8.0\n.target sm_100\n.visible .entry k() { ret; }\n";
  CHECK_STATUS(mtc_module_load(1, too_new, sizeof too_new - 1, &m), MTC_ERR_CUDA);
  CHECK(m == NULL);
  CHECK(contains(mtc_last_error(), "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX") &&
        contains(mtc_last_error(), "; the JIT compiler says: ptxas application ptx input: fatal: .target sm_100"));
  CHECK_STATUS(mtc_module_load(0, ptx, 0, &m), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_module_load(-1, ptx, sizeof ptx - 1, &m), MTC_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(mtc_module_load(9, ptx, sizeof ptx - 1, &m), MTC_ERR_NO_DEVICE);
  /* No NUL at the end: the library adds one. */
  int modules = fake.live_modules();
  CHECK_OK(mtc_module_load(0, ptx, sizeof ptx - 1, &m));
  CHECK(fake.live_modules() == modules + 1);
  uint64_t f = 0;
  CHECK_OK(mtc_module_get_function(m, "add_one_f32", &f));
  CHECK(f != 0);
  CHECK_STATUS(mtc_module_get_function(m, "add_two", &f), MTC_ERR_CUDA);
  CHECK(f == 0);
  CHECK(contains(mtc_last_error(), "\"add_two\"") &&
        contains(mtc_last_error(), "CUDA_ERROR_NOT_FOUND"));
  mtc_module_unload(m);
  CHECK(fake.live_modules() == modules);
  mtc_module_unload(NULL);
}

static void test_launch(void) {
  uint64_t stream = 0;
  CHECK_OK(mtc_stream_create(0, &stream));
  mtc_module *m = NULL;
  CHECK_OK(mtc_module_load(0, ptx, sizeof ptx, &m));
  uint64_t scalars = 0, add = 0;
  CHECK_OK(mtc_module_get_function(m, "scalars", &scalars));
  CHECK_OK(mtc_module_get_function(m, "add_one_f32", &add));
  if (m == NULL || scalars == 0 || add == 0) return;

  /* Parameters at 8-byte slots, each read as the kernel declares it. */
  unsigned char params[48];
  memset(params, 0xEE, sizeof params);
  int32_t a = -5;
  uint32_t b = 0xFFFFFFFFu;
  int64_t c = -(1ll << 40);
  float d = 1.5f;
  double e = -0.25;
  uint64_t f = 0x123456789ABCull;
  memcpy(params + 0, &a, 4);
  memcpy(params + 8, &b, 4);
  memcpy(params + 16, &c, 8);
  memcpy(params + 24, &d, 4);
  memcpy(params + 32, &e, 8);
  memcpy(params + 40, &f, 8);
  uint32_t offsets[] = {0, 8, 16, 24, 32, 40};
  uint32_t dims[7] = {3, 2, 1, 64, 2, 1, 128};
  CHECK_OK(mtc_kernel_launch(m, scalars, stream, dims, params, sizeof params,
                             offsets, 6, NULL, 0));
  unsigned got_dims[8];
  unsigned char got[64];
  CHECK(fake.last_launch(got_dims, got, sizeof got) == 4 + 4 + 8 + 4 + 8 + 8);
  CHECK(got_dims[0] == 3 && got_dims[1] == 2 && got_dims[2] == 1 &&
        got_dims[3] == 64 && got_dims[4] == 2 && got_dims[5] == 1 &&
        got_dims[6] == 128 && got_dims[7] == 6);
  unsigned char want[36];
  memcpy(want, &a, 4);
  memcpy(want + 4, &b, 4);
  memcpy(want + 8, &c, 8);
  memcpy(want + 16, &d, 4);
  memcpy(want + 20, &e, 8);
  memcpy(want + 28, &f, 8);
  CHECK(memcmp(got, want, sizeof want) == 0);
  CHECK(fake.last_launch_stream() == stream);

  /* Errors before the driver, and the driver's own. */
  uint32_t zero[7] = {1, 0, 1, 1, 1, 1, 0};
  CHECK_STATUS(mtc_kernel_launch(m, scalars, stream, zero, params, sizeof params,
                                 offsets, 6, NULL, 0),
               MTC_ERR_INVALID_ARGUMENT);
  CHECK(contains(mtc_last_error(), "grid y is 0"));
  CHECK_STATUS(mtc_kernel_launch(m, scalars, 0, dims, params, sizeof params,
                                 offsets, 6, NULL, 0),
               MTC_ERR_INVALID_ARGUMENT);
  uint32_t outside[] = {0, 8, 16, 24, 32, 48};
  CHECK_STATUS(mtc_kernel_launch(m, scalars, stream, dims, params, sizeof params,
                                 outside, 6, NULL, 0),
               MTC_ERR_INVALID_ARGUMENT);
  uint32_t huge[7] = {1, 1, 1, 2048, 1, 1, 0};
  CHECK_STATUS(mtc_kernel_launch(m, scalars, stream, huge, params, sizeof params,
                                 offsets, 6, NULL, 0),
               MTC_ERR_CUDA);
  CHECK(contains(mtc_last_error(), "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"));

  /* A block the kernel writes outlives its last reference until the
   * stream has passed the launch (modelled as 50 ms). */
  mtc_block *block = NULL;
  CHECK_OK(mtc_device_block_alloc(0, 40, MTC_ALLOC_ZERO, &block));
  if (block == NULL) return;
  uint64_t address = block_address(block);
  uint32_t n = 10;
  unsigned char add_params[16];
  memcpy(add_params, &address, 8);
  memcpy(add_params + 8, &n, 4);
  uint32_t add_offsets[] = {0, 8};
  uint32_t add_dims[7] = {1, 1, 1, 32, 1, 1, 0};
  uint64_t live = checked_stats().blocks_live;
  fake.set_copy_delay_us(50000);
  mtc_block *blocks[] = {block, NULL};
  CHECK_OK(mtc_kernel_launch(m, add, stream, add_dims, add_params,
                             sizeof add_params, add_offsets, 2, blocks, 2));
  fake.set_copy_delay_us(0);
  const float *values = (const float *)(uintptr_t)address;
  CHECK(values[0] == 1.0f && values[9] == 1.0f);
  mtc_block_release(block);
  CHECK(checked_stats().blocks_live == live); /* still held by the launch */
  CHECK(mtc_launches_settle(0) == 1);
  CHECK(checked_stats().blocks_live == live);
  CHECK_OK(mtc_stream_synchronize(0, stream)); /* settles what it passed */
  CHECK(mtc_launches_settle(0) == 0);
  CHECK(checked_stats().blocks_live == live - 1);

  /* settle(1) waits for the launch. */
  CHECK_OK(mtc_device_block_alloc(0, 40, 0, &block));
  fake.set_copy_delay_us(30000);
  blocks[0] = block;
  address = block_address(block);
  memcpy(add_params, &address, 8);
  double t0 = now_ms();
  CHECK_OK(mtc_kernel_launch(m, add, stream, add_dims, add_params,
                             sizeof add_params, add_offsets, 2, blocks, 1));
  fake.set_copy_delay_us(0);
  mtc_block_release(block);
  CHECK(checked_stats().blocks_live == live);
  CHECK(mtc_launches_settle(1) == 0);
  CHECK(now_ms() - t0 >= 25);
  CHECK(checked_stats().blocks_live == live - 1);

  /* A stream of another device than the module's. */
  uint64_t stream1 = 0;
  CHECK_OK(mtc_stream_create(1, &stream1));
  CHECK_STATUS(mtc_kernel_launch(m, scalars, stream1, dims, params,
                                 sizeof params, offsets, 6, NULL, 0),
               MTC_ERR_CUDA);
  CHECK(contains(mtc_last_error(), "CUDA_ERROR_INVALID_HANDLE"));
  mtc_stream_destroy(1, stream1);
  mtc_module_unload(m);
  mtc_stream_destroy(0, stream);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, "test_user_kernels");
  if (driver == NULL) return 1;
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_DEVICE_MEMORY_BYTES", "256m", 1);
  void *handle = fake_open(driver);
  if (handle == NULL) return check_summary("test_user_kernels");
  FAKE_SYM(handle, fake.set_copy_delay_us, "fake_cuda_set_copy_delay_us");
  FAKE_SYM(handle, fake.last_launch, "fake_cuda_last_launch");
  FAKE_SYM(handle, fake.last_launch_stream, "fake_cuda_last_launch_stream");
  FAKE_SYM(handle, fake.live_device_allocations, "fake_cuda_live_device_allocations");
  FAKE_SYM(handle, fake.live_modules, "fake_cuda_live_modules");
  CHECK(fake.last_launch != NULL && fake.set_copy_delay_us != NULL && fake.live_modules != NULL);
  if (fake.last_launch == NULL || fake.live_modules == NULL) return check_summary("test_user_kernels");
  int live_allocations = fake.live_device_allocations();
  test_alloc();
  test_modules();
  test_launch();
  CHECK(mtc_launches_settle(1) == 0);
  mtc_trim_pools();
  CHECK(fake.live_device_allocations() <= live_allocations);
  return check_summary("test_user_kernels");
}
