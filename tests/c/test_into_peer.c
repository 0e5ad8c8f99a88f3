/* test_into_peer.c — copies into existing memory between two GPUs
 * (mtc_plan_add_leaves_into from cuda:1 to cuda:0), byte-exact for every
 * element size and odd sizes, packed and own leaves, into views of one
 * block and into blocks of their own: one gather launch on cuda:1 when
 * every packed leaf's destination was named a block of libmtc's
 * (mtc_plan_set_destination_blocks) and the pair has peer access, one peer
 * copy a leaf otherwise, and the checks of the blocks named.
 *
 *   test_into_peer DRIVER peer|no-peer   the emulated driver with two
 *                                         devices, FAKE_CUDA_NO_PEER off or on
 *   test_into_peer                        a real CUDA host (skips with fewer
 *                                         than two devices)
 *
 * libmtc sets peer access up once per pair for the life of the process, so
 * each mode is a process of its own (build.zig runs both). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_symbols.h"
#include "helpers.h"
#include "readback.h"

/* The driver's types as cuda.h spells them, so that calls through these
 * pointers have the callee's exact type (-fsanitize=function). */
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmemLocation_st {
  int type, id;
} CUmemLocation;
typedef struct CUmemPoolProps_st {
  int allocType, handleTypes;
  CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

/* The emulated driver's hooks and calls (NULL on a real GPU). */
static unsigned long long (*kernel_launches)(void);
static int (*fake_init)(unsigned int);
static int (*fake_ctx_retain)(CUcontext *, int);
static int (*fake_ctx_push)(CUcontext);
static int (*fake_ctx_pop)(CUcontext *);
static int (*fake_pool_create)(CUmemoryPool *, const CUmemPoolProps *);
static int (*fake_alloc_from_pool)(unsigned long long *, size_t, CUmemoryPool, CUstream);
static int (*fake_stream_sync)(CUstream);

/* 1: the pair has peer access, 0: not, -1: unknown (a real GPU). */
static int peer = -1;

static unsigned long long launches(void) {
  return kernel_launches ? kernel_launches() : 0;
}

/* Every element size, odd counts, and two leaves past the packing
 * threshold (their own block: one peer copy each on every path). */
#define LEAVES 12
#define OWN_LEAVES 2
static const uint64_t leaf_bytes[LEAVES] = {1, 3, 14, 4, 12, 40, 16, 48, 9999,
                                            1000, (300u << 10) + 7, 400u << 10};
static const uint32_t leaf_element[LEAVES] = {1, 1, 2, 4, 4, 8, 16, 16, 1, 8, 1, 4};

static mtc_options options_of(uint32_t background) {
  mtc_options options = MTC_OPTIONS_INIT;
  options.use_background_thread = background;
  return options;
}

/* A plain plan of host leaves to `device` (no_pack: a block each); the
 * caller releases it. */
static mtc_plan *upload(int32_t device, uint8_t **data, int no_pack, mtc_leaf_result *out) {
  mtc_leaf leaves[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(host_address(data[i]), leaf_bytes[i], leaf_element[i], MTC_DEVICE_CPU);
    if (no_pack) leaves[i].flags = MTC_LEAF_NO_PACK;
  }
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(device, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves(plan, leaves, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, LEAVES, out));
  return plan;
}

static uint8_t **leaves_of(int random) {
  uint8_t **data = malloc(LEAVES * sizeof *data);
  for (int i = 0; i < LEAVES; i++) {
    data[i] = random ? random_bytes((size_t)leaf_bytes[i]) : calloc(1, (size_t)leaf_bytes[i]);
  }
  return data;
}

static void free_leaves(uint8_t **data) {
  for (int i = 0; i < LEAVES; i++) free(data[i]);
  free(data);
}

static void check_holds(int32_t device, const uint64_t *dst, uint8_t **expected) {
  for (int i = 0; i < LEAVES; i++) {
    uint8_t *back = malloc((size_t)leaf_bytes[i]);
    download(device, dst[i], leaf_bytes[i], back);
    CHECK(memcmp(back, expected[i], (size_t)leaf_bytes[i]) == 0);
    free(back);
  }
}

/* Copies the sources (on cuda:1) into dst (on cuda:0) with one plan, naming
 * `blocks` (NULL: none) as the destinations' blocks; returns the plan's
 * copies_issued and, through *launched, the kernel launches it made. */
static uint64_t copy_across(const uint64_t *src, const uint64_t *dst, mtc_block **blocks,
                            uint32_t background, unsigned long long *launched) {
  mtc_leaf leaves[LEAVES], into[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    leaves[i] = make_leaf(src[i], leaf_bytes[i], leaf_element[i], 1);
    into[i] = make_leaf(dst[i], leaf_bytes[i], leaf_element[i], 0);
  }
  mtc_options options = options_of(background);
  mtc_plan *plan = NULL;
  unsigned long long before = launches();
  CHECK_OK(mtc_plan_create(0, &options, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, into, LEAVES));
  if (blocks != NULL) CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_stats stats = {.struct_size = sizeof stats};
  CHECK_OK(mtc_plan_get_stats(plan, &stats));
  mtc_plan_release(plan);
  *launched = launches() - before;
  return stats.copies_issued;
}

/* The path taken: one gather launch for the packed leaves, or a copy each. */
static void check_path(uint64_t issued, unsigned long long launched, int gathered) {
  if (gathered) {
    CHECK_EQ_U64(issued, 1 + OWN_LEAVES);
    if (kernel_launches != NULL) CHECK_EQ_U64(launched, 1);
  } else {
    CHECK_EQ_U64(issued, LEAVES);
    CHECK_EQ_U64(launched, 0);
  }
}

/* cuda:1 -> cuda:0 into views of one block (a packed copy's results) or
 * into blocks of their own (mtc_device_block_alloc), blocks named or not. */
static void test_across(int own_blocks, uint32_t background) {
  uint8_t **data = leaves_of(1), **zeros = leaves_of(0);
  mtc_leaf_result src[LEAVES], made[LEAVES];
  mtc_plan *sources = upload(1, data, 0, src);
  mtc_plan *made_plan = own_blocks ? NULL : upload(0, zeros, 0, made);
  uint64_t from[LEAVES], to[LEAVES];
  mtc_block *blocks[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    from[i] = src[i].address;
    if (own_blocks) {
      CHECK_OK(mtc_device_block_alloc(0, leaf_bytes[i], MTC_ALLOC_ZERO, &blocks[i]));
      mtc_block_info info = {.struct_size = sizeof info};
      CHECK_OK(mtc_block_get_info(blocks[i], &info));
      to[i] = info.address;
    } else {
      blocks[i] = made[i].block;
      to[i] = made[i].address;
    }
  }
  int can_gather = mtc_has_kernels() && peer != 0;
  unsigned long long launched;
  uint64_t issued = copy_across(from, to, blocks, background, &launched);
  check_holds(0, to, data);
  if (peer >= 0) check_path(issued, launched, can_gather);

  /* Again with other bytes, the blocks not named: a copy each. */
  uint8_t **next = leaves_of(1);
  mtc_leaf_result src2[LEAVES];
  mtc_plan *sources2 = upload(1, next, 0, src2);
  for (int i = 0; i < LEAVES; i++) from[i] = src2[i].address;
  issued = copy_across(from, to, NULL, background, &launched);
  check_holds(0, to, next);
  check_path(issued, launched, 0);

  /* One packed leaf's block not named: the whole source goes a copy each. */
  mtc_block *one_missing[LEAVES];
  memcpy(one_missing, blocks, sizeof blocks);
  one_missing[3] = NULL;
  for (int i = 0; i < LEAVES; i++) from[i] = src[i].address;
  issued = copy_across(from, to, one_missing, background, &launched);
  check_holds(0, to, data);
  check_path(issued, launched, 0);

  if (own_blocks) {
    for (int i = 0; i < LEAVES; i++) mtc_block_release(blocks[i]);
  }
  mtc_plan_release(made_plan);
  mtc_plan_release(sources2);
  mtc_plan_release(sources);
  free_leaves(next);
  free_leaves(zeros);
  free_leaves(data);
}

/* A destination in another allocator's pool on cuda:0, which libmtc cannot
 * open to cuda:1: a gather kernel on cuda:1 would fault there (the
 * emulated driver fails its launch with ILLEGAL_ADDRESS), so it is not
 * named and the copies are one peer copy each. The emulated driver only. */
static void test_foreign_pool(void) {
  if (fake_pool_create == NULL) return;
  CUcontext ctx0 = NULL, popped = NULL;
  CUmemoryPool pool = NULL;
  CHECK(fake_init(0) == 0);
  CHECK(fake_ctx_retain(&ctx0, 0) == 0);
  CHECK(fake_ctx_push(ctx0) == 0);
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = 1;     /* CU_MEM_ALLOCATION_TYPE_PINNED */
  props.location.type = 1; /* CU_MEM_LOCATION_TYPE_DEVICE, device 0 */
  CHECK(fake_pool_create(&pool, &props) == 0);
  uint64_t foreign[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    unsigned long long address = 0;
    CHECK(fake_alloc_from_pool(&address, (size_t)leaf_bytes[i], pool, NULL) == 0);
    foreign[i] = address;
  }
  CHECK(fake_stream_sync(NULL) == 0);
  CHECK(fake_ctx_pop(&popped) == 0);

  uint8_t **data = leaves_of(1);
  mtc_leaf_result src[LEAVES];
  mtc_plan *sources = upload(1, data, 0, src);
  uint64_t from[LEAVES];
  for (int i = 0; i < LEAVES; i++) from[i] = src[i].address;
  unsigned long long launched;
  uint64_t issued = copy_across(from, foreign, NULL, 1, &launched);
  check_holds(0, foreign, data);
  check_path(issued, launched, 0);
  mtc_plan_release(sources);
  free_leaves(data);
}

/* A plan whose mtc_plan_set_destination_blocks must fail with `expected`
 * naming leaf `leaf` (-1: none). */
static void expect_refused(mtc_plan *plan, uint64_t first, mtc_block *const *blocks,
                           uint64_t count, mtc_status expected, int64_t leaf, const char *text) {
  CHECK_STATUS(mtc_plan_set_destination_blocks(plan, first, blocks, count), expected);
  CHECK_CONTAINS(mtc_last_error(), text);
  CHECK_EQ_U64(mtc_plan_error_leaf(plan), leaf);
}

/* The blocks named are checked, never trusted. */
static void test_checks(void) {
  mtc_block *a = NULL, *b = NULL, *other = NULL;
  CHECK_OK(mtc_device_block_alloc(0, 256, 0, &a));
  CHECK_OK(mtc_device_block_alloc(0, 256, 0, &b));
  CHECK_OK(mtc_device_block_alloc(1, 256, 0, &other));
  mtc_block_info ia = {.struct_size = sizeof ia}, ib = {.struct_size = sizeof ib};
  CHECK_OK(mtc_block_get_info(a, &ia));
  CHECK_OK(mtc_block_get_info(b, &ib));
  mtc_block_info io = {.struct_size = sizeof io};
  CHECK_OK(mtc_block_get_info(other, &io));
  mtc_leaf leaves[2] = {make_leaf(io.address, 64, 4, 1), make_leaf(io.address + 64, 64, 4, 1)};
  mtc_leaf into[2] = {make_leaf(ia.address + 192, 64, 4, 0), make_leaf(ib.address, 64, 4, 0)};

  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  mtc_block *blocks[2] = {a, b};
  expect_refused(plan, 0, blocks, 2, MTC_ERR_INVALID_STATE, -1, "mtc_plan_add_leaves_into");
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, into, 2));
  mtc_block *swapped[2] = {b, a};
  expect_refused(plan, 0, swapped, 2, MTC_ERR_INVALID_ARGUMENT, 0, "does not lie inside the block");
  into[0].address = ia.address + 193; /* one byte past the end */
  mtc_plan *past = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &past));
  CHECK_OK(mtc_plan_add_leaves_into(past, leaves, into, 1));
  expect_refused(past, 0, blocks, 1, MTC_ERR_INVALID_ARGUMENT, 0, "does not lie inside the block");
  mtc_plan_release(past);
  mtc_block *wrong_device[2] = {a, other};
  expect_refused(plan, 0, wrong_device, 2, MTC_ERR_INVALID_ARGUMENT, 1, "is on cuda:1");
  expect_refused(plan, 1, blocks, 2, MTC_ERR_INVALID_ARGUMENT, -1, "but the plan has 2");
  expect_refused(plan, 0, NULL, 1, MTC_ERR_INVALID_ARGUMENT, -1, "blocks must not be NULL");
  /* Named in two calls, then once more (replacing), then the copy. */
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, 1));
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 1, &blocks[1], 1));
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, 2));
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, 0));
  /* The plan holds the blocks: dropping ours changes nothing. */
  mtc_block_retain(a);
  mtc_block_release(a);
  CHECK_OK(mtc_plan_submit(plan));
  expect_refused(plan, 0, blocks, 2, MTC_ERR_INVALID_STATE, -1, "only before submit");
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);

  /* A host destination has no device block. */
  uint8_t host[64];
  mtc_leaf to_host = make_leaf(host_address(host), 64, 4, MTC_DEVICE_CPU);
  CHECK_OK(mtc_plan_create(MTC_DEVICE_CPU, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, &to_host, 1));
  expect_refused(plan, 0, blocks, 1, MTC_ERR_INVALID_ARGUMENT, 0, "host memory");
  mtc_plan_release(plan);
  mtc_block_release(a);
  mtc_block_release(b);
  mtc_block_release(other);
  mtc_stats stats = checked_stats();
  CHECK_EQ_U64(stats.blocks_live, 0);
}

/* Host leaves, cuda:0's and cuda:1's in one plan into cuda:0 blocks: each
 * source device's packed leaves take their own path. */
static void test_mixed_sources(void) {
  uint8_t **data = leaves_of(1), **zeros = leaves_of(0);
  mtc_leaf_result on0[LEAVES], on1[LEAVES], made[LEAVES];
  mtc_plan *p0 = upload(0, data, 0, on0), *p1 = upload(1, data, 0, on1);
  mtc_plan *pm = upload(0, zeros, 0, made);
  mtc_leaf leaves[LEAVES], into[LEAVES];
  mtc_block *blocks[LEAVES];
  uint64_t to[LEAVES];
  for (int i = 0; i < LEAVES; i++) {
    int32_t from = i % 3 == 0 ? MTC_DEVICE_CPU : i % 3 == 1 ? 0 : 1;
    uint64_t address = from < 0 ? host_address(data[i]) : from == 0 ? on0[i].address : on1[i].address;
    leaves[i] = make_leaf(address, leaf_bytes[i], leaf_element[i], from);
    into[i] = make_leaf(made[i].address, leaf_bytes[i], leaf_element[i], 0);
    blocks[i] = made[i].block;
    to[i] = made[i].address;
  }
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(0, NULL, &plan));
  CHECK_OK(mtc_plan_add_leaves_into(plan, leaves, into, LEAVES));
  CHECK_OK(mtc_plan_set_destination_blocks(plan, 0, blocks, LEAVES));
  CHECK_OK(mtc_plan_submit(plan));
  CHECK_OK(mtc_plan_wait(plan));
  mtc_plan_release(plan);
  check_holds(0, to, data);
  mtc_plan_release(pm);
  mtc_plan_release(p1);
  mtc_plan_release(p0);
  free_leaves(zeros);
  free_leaves(data);
}

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, "test_into_peer");
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  if (driver != NULL && argc > 2) {
    peer = strcmp(argv[2], "no-peer") != 0;
    setenv("FAKE_CUDA_NO_PEER", peer ? "0" : "1", 1);
    void *fake = fake_open(driver);
    if (fake != NULL) {
      FAKE_SYM(fake, kernel_launches, "fake_cuda_kernel_launches");
      FAKE_SYM(fake, fake_init, "cuInit");
      FAKE_SYM(fake, fake_ctx_retain, "cuDevicePrimaryCtxRetain");
      FAKE_SYM(fake, fake_ctx_push, "cuCtxPushCurrent_v2");
      FAKE_SYM(fake, fake_ctx_pop, "cuCtxPopCurrent_v2");
      FAKE_SYM(fake, fake_pool_create, "cuMemPoolCreate");
      FAKE_SYM(fake, fake_alloc_from_pool, "cuMemAllocFromPoolAsync");
      FAKE_SYM(fake, fake_stream_sync, "cuStreamSynchronize");
    }
  }
  int32_t devices = 0;
  if (mtc_cuda_device_count(&devices) != MTC_OK || devices < 2) {
    printf("test_into_peer: skipped: needs two CUDA devices (this host has %d)\n", devices);
    return 0;
  }
  printf("test_into_peer: %s, kernels %s\n",
         peer < 0 ? "a real driver (peer access as the host has it)"
                  : peer ? "the emulated driver, peer access" : "the emulated driver, no peer access",
         mtc_has_kernels() ? "on" : "off");
  test_checks();
  for (uint32_t background = 0; background < 2; background++) {
    test_across(0, background);
    test_across(1, background);
  }
  test_foreign_pool();
  test_mixed_sources();
  return check_summary("test_into_peer");
}
