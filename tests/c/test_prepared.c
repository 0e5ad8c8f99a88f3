/* test_prepared.c — a plan of a prepared copy (mtc/prepared.h) does what a
 * plain plan of the same batch does: for each kind of batch (the example
 * batch; packed, own-block, unpacked and zero-byte leaves; strided and
 * pitched host leaves; pinned leaves; device sources; copies into
 * destinations, every direction) the two place every leaf alike, count
 * alike and land the same bytes, with the template's own addresses, with
 * new ones, and through mtc_prepared_plan with a stream. Against the
 * emulated driver (two devices; its path in argv[1]) or a real GPU. Errors,
 * threads and lifetimes: test_prepared_rules.c. */
#include "check.h"
#include "helpers.h"
#include "readback.h"

#define SUITE "test_prepared"
enum { MAX_LEAVES = 528 };

typedef struct shape {
  const char *name;
  int32_t source, target; /* where the leaves lie, where they go */
  int into;    /* copies into destinations on the target */
  int example; /* the example batch, else the mixed sizes */
  int strided; /* host leaves transposed (i % 3 == 0) or in rows (1) */
  int pinned;  /* 1: MTC_LEAF_PINNED in one pinned block; 2: flagged, pageable */
} shape;

/* One batch of a shape, over memory it owns; dst[0] for the prepared
 * copy's plans, dst[1] for the plain ones. */
typedef struct batch {
  uint64_t n;
  mtc_leaf leaves[MAX_LEAVES], dst[2][MAX_LEAVES];
  mtc_leaf_layout layouts[MAX_LEAVES]; /* rank 0: contiguous */
  void *host[3 * MAX_LEAVES];
  int host_count;
  mtc_block *blocks[4];
  int block_count;
  mtc_plan *sources; /* the upload that made device sources */
} batch;

static int32_t device_count;

static const uint64_t mixed_bytes[12] = {1, 6, 0, 64, 100, 4096, 0, 12, 300 << 10, 16, 40000, (1 << 20) + 16};
static const uint32_t mixed_element[12] = {1, 2, 4, 4, 4, 8, 1, 2, 4, 16, 8, 4};
/* Strided: 4 x m elements each. */
static const uint64_t strided_bytes[8] = {16, 48, 0, 256, 4096, 384 << 10, 64, 800};
static const uint32_t strided_element[8] = {1, 2, 4, 4, 8, 4, 16, 4};

static uint64_t leaf_count(const shape *s) { return s->example ? 528 : s->strided ? 16 : 24; }

static void size_of(const shape *s, uint64_t i, uint64_t *bytes, uint32_t *element) {
  if (s->strided) {
    *bytes = strided_bytes[i % 8], *element = strided_element[i % 8];
  } else if (!s->example) {
    *bytes = mixed_bytes[i % 12], *element = mixed_element[i % 12];
  } else {
    static const int gt[4] = {60, 100, 45, 120};
    static const int visible[4][6] = {{30, 20, 40, 10, 50, 20}, {60, 40, 30, 70, 20, 50},
                                      {10, 20, 10, 30, 20, 10}, {80, 50, 60, 40, 70, 30}};
    static const uint64_t per_n[5] = {16, 8, 1, 4, 0}, camera_element[5] = {4, 8, 1, 4, 4};
    static const uint64_t gt_per_n[3] = {28, 8, 1}, gt_element[3] = {4, 8, 1};
    uint64_t sample = i / 33, k = i % 33, config = sample % 4;
    if (k < 30) {
      uint64_t n = (uint64_t)visible[config][k / 5];
      *bytes = k % 5 == 4 ? 48 : n * per_n[k % 5];
      *element = (uint32_t)camera_element[k % 5];
    } else {
      *bytes = (uint64_t)gt[config] * gt_per_n[k - 30];
      *element = (uint32_t)gt_element[k - 30];
    }
  }
}

static mtc_block *new_block(batch *b, int32_t device, uint64_t bytes, uint64_t *address) {
  mtc_block *block = NULL;
  if (device == MTC_DEVICE_CPU) CHECK_OK(mtc_host_block_alloc(0, bytes, &block));
  else CHECK_OK(mtc_device_block_alloc(device, bytes, 0, &block));
  mtc_block_info info = {sizeof info, 0, 0, 0, 0, 0};
  if (block != NULL) CHECK_OK(mtc_block_get_info(block, &info));
  b->blocks[b->block_count++] = block;
  *address = info.address;
  return block;
}

/* The destinations of one set: host buffers, or views into one device block. */
static void make_destinations(const shape *s, batch *b, mtc_leaf *dst) {
  uint64_t total = 0, base = 0;
  for (uint64_t i = 0; i < b->n; i++) total += (b->leaves[i].bytes + 255) / 256 * 256;
  if (s->target != MTC_DEVICE_CPU) new_block(b, s->target, total ? total : 1, &base);
  for (uint64_t i = 0, at = 0; i < b->n; i++) {
    uint64_t bytes = b->leaves[i].bytes, address = 0;
    if (bytes > 0 && s->target == MTC_DEVICE_CPU) {
      b->host[b->host_count++] = calloc(1, bytes);
      address = host_address(b->host[b->host_count - 1]);
    } else if (bytes > 0) {
      address = base + at;
      at += (bytes + 255) / 256 * 256;
    }
    dst[i] = make_leaf(address, bytes, b->leaves[i].element_size, s->target);
  }
}

/* A batch of the shape with fresh memory (new addresses, new bytes). */
static batch *make_batch(const shape *s) {
  batch *b = calloc(1, sizeof *b);
  b->n = leaf_count(s);
  uint64_t pinned_base = 0, at = 0;
  if (s->pinned == 1) new_block(b, MTC_DEVICE_CPU, 8u << 20, &pinned_base);
  for (uint64_t i = 0; i < b->n; i++) {
    uint64_t bytes, span;
    uint32_t element;
    size_of(s, i, &bytes, &element);
    int kind = s->strided && bytes > 0 ? (int)(i % 3) : 2;
    uint64_t row = bytes / 4, pitch = row + 8;
    span = kind == 1 ? pitch * 3 + row : bytes;
    uint8_t *data = random_bytes((size_t)span);
    uint64_t address = host_address(data);
    if (s->pinned == 1) {
      address = pinned_base + at;
      at += (span + 15) / 16 * 16;
      memcpy((void *)(uintptr_t)address, data, (size_t)span);
      free(data);
    } else {
      b->host[b->host_count++] = data;
    }
    b->leaves[i] = make_leaf(bytes ? address : 0, bytes, element, MTC_DEVICE_CPU);
    if (s->pinned) b->leaves[i].flags = MTC_LEAF_PINNED;
    if (!s->example && !s->strided && i % 7 == 3) b->leaves[i].flags |= MTC_LEAF_NO_PACK;
    if (kind == 1) b->leaves[i].row_count = 4, b->leaves[i].row_pitch = pitch;
    if (kind == 0) {
      uint64_t m = bytes / element / 4;
      mtc_leaf_layout t = {sizeof t, 2, {4, m}, {element, 4 * (uint64_t)element}};
      b->layouts[i] = t;
    }
  }
  if (s->source != MTC_DEVICE_CPU) {
    mtc_leaf_result *on = calloc(b->n, sizeof *on);
    CHECK_OK(mtc_plan_create(s->source, NULL, &b->sources));
    CHECK_OK(mtc_plan_add_leaves(b->sources, b->leaves, b->n));
    CHECK_OK(mtc_plan_submit(b->sources));
    CHECK_OK(mtc_plan_wait(b->sources));
    CHECK_OK(mtc_plan_results(b->sources, 0, b->n, on));
    for (uint64_t i = 0; i < b->n; i++) {
      b->leaves[i].address = on[i].address;
      b->leaves[i].device = s->source;
    }
    free(on);
  }
  if (s->into) {
    make_destinations(s, b, b->dst[0]);
    make_destinations(s, b, b->dst[1]);
  }
  return b;
}

static void free_batch(batch *b) {
  for (int i = 0; i < b->host_count; i++) free(b->host[i]);
  for (int i = 0; i < b->block_count; i++) mtc_block_release(b->blocks[i]);
  mtc_plan_release(b->sources);
  free(b);
}

/* A plain plan of the batch, built and not submitted. */
static mtc_plan *build(const shape *s, const batch *b, const mtc_options *o, int set) {
  mtc_plan *plan = NULL;
  CHECK_OK(mtc_plan_create(s->target, o, &plan));
  if (s->into) CHECK_OK(mtc_plan_add_leaves_into(plan, b->leaves, b->dst[set], b->n));
  else CHECK_OK(mtc_plan_add_leaves(plan, b->leaves, b->n));
  for (uint64_t i = 0; i < b->n; i++) {
    if (b->layouts[i].rank > 0) CHECK_OK(mtc_plan_set_leaf_layout(plan, i, &b->layouts[i]));
  }
  return plan;
}

/* What a finished plan did: each leaf's result and bytes, its counters. */
typedef struct outcome {
  mtc_leaf_result results[MAX_LEAVES];
  uint8_t *bytes[MAX_LEAVES];
  mtc_plan_stats stats;
} outcome;

/* Waits for the plan, reads what it did into *o and releases it. */
static void finish(mtc_plan *plan, const batch *b, outcome *o) {
  CHECK_OK(mtc_plan_wait(plan));
  CHECK_OK(mtc_plan_results(plan, 0, b->n, o->results));
  o->stats.struct_size = sizeof o->stats;
  CHECK_OK(mtc_plan_get_stats(plan, &o->stats));
  for (uint64_t i = 0; i < b->n; i++) {
    uint64_t bytes = b->leaves[i].bytes;
    const mtc_leaf_result *r = &o->results[i];
    o->bytes[i] = calloc(1, bytes ? bytes : 1);
    if (bytes == 0) continue;
    if (r->device == MTC_DEVICE_CPU) memcpy(o->bytes[i], (const void *)(uintptr_t)r->address, bytes);
    else download(r->device, r->address, bytes, o->bytes[i]);
  }
  mtc_plan_release(plan);
}

/* The prepared copy's plan did what the plain one did. */
static void check_alike(const char *name, int round, const batch *b, const outcome *want,
                        const outcome *got) {
  for (uint64_t i = 0; i < b->n; i++) {
    const mtc_leaf_result *w = &want->results[i], *g = &got->results[i];
    int same = w->flags == g->flags && w->device == g->device && w->offset == g->offset &&
               memcmp(want->bytes[i], got->bytes[i], (size_t)b->leaves[i].bytes) == 0;
    if (!same) printf("%s, round %d: leaf %llu differs\n", name, round, (unsigned long long)i);
    CHECK(same);
  }
  const mtc_plan_stats *w = &want->stats, *g = &got->stats;
  CHECK_EQ_U64(g->leaves, w->leaves);
  CHECK_EQ_U64(g->leaves_reused, w->leaves_reused);
  CHECK_EQ_U64(g->leaves_packed, w->leaves_packed);
  CHECK_EQ_U64(g->leaves_direct, w->leaves_direct);
  CHECK_EQ_U64(g->chunks, w->chunks);
  CHECK_EQ_U64(g->blocks, w->blocks);
  CHECK_EQ_U64(g->bytes_copied, w->bytes_copied);
}

static void free_outcome(outcome *o, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) free(o->bytes[i]);
  free(o);
}

/* Round 0: the template's own batch; 1: a new one; 2: a new one through
 * mtc_prepared_plan, with a stream of the caller's on a device target; 3: a
 * new one, into the template's destinations. */
static void run_shape(const shape *s, uint32_t background) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.use_background_thread = background;
  batch *first = make_batch(s);
  mtc_plan *template_plan = build(s, first, &o, 0);
  mtc_prepared *p = NULL;
  CHECK_OK(mtc_prepared_create(template_plan, &p));
  mtc_plan_release(template_plan);
  if (p == NULL) return;
  CHECK_EQ_U64(mtc_prepared_leaf_count(p), first->n);
  for (int round = 0; round < 4; round++) {
    batch *b = round == 0 ? first : make_batch(s);
    outcome *want = calloc(1, sizeof *want), *got = calloc(1, sizeof *got);
    mtc_plan *plain = build(s, b, &o, 1);
    CHECK_OK(mtc_plan_submit(plain));
    finish(plain, b, want);
    /* Rounds 0 and 3 into the template's own destinations (a copy into
     * the device then reads the scatter tables kept there). */
    const mtc_leaf *dst = s->into && (round == 1 || round == 2) ? b->dst[0] : NULL;
    mtc_plan *plan = NULL;
    uint64_t stream = 0;
    if (round != 2) {
      CHECK_OK(mtc_prepared_submit(p, b->leaves, dst, b->n, &plan));
    } else {
      CHECK_OK(mtc_prepared_plan(p, b->leaves, dst, b->n, &plan));
      if (plan != NULL && s->target != MTC_DEVICE_CPU) {
        CHECK_OK(mtc_stream_create(s->target, &stream));
        CHECK_OK(mtc_plan_set_stream(plan, s->target, stream));
      }
      if (plan != NULL) CHECK_OK(mtc_plan_submit(plan));
    }
    CHECK(plan != NULL);
    if (plan != NULL) {
      finish(plan, b, got);
      check_alike(s->name, round, b, want, got);
      if (s->pinned == 1) CHECK(got->stats.leaves_direct > 0 || s->into);
      if (s->pinned == 2) CHECK_EQ_U64(got->stats.leaves_direct, 0);
    }
    if (stream != 0) {
      CHECK_OK(mtc_stream_synchronize(s->target, stream));
      mtc_stream_destroy(s->target, stream);
    }
    free_outcome(want, b->n);
    free_outcome(got, b->n);
    if (round > 0) free_batch(b);
  }
  mtc_prepared_release(p);
  free_batch(first);
}

#define CPU MTC_DEVICE_CPU
static const shape shapes[] = {
    /* name                                   source target into example strided pinned */
    {"example batch host -> cuda:0", CPU, 0, 0, 1, 0, 0},
    {"mixed host -> cuda:0", CPU, 0, 0, 0, 0, 0},
    {"strided host -> cuda:0", CPU, 0, 0, 0, 1, 0},
    {"strided host -> cpu", CPU, CPU, 0, 0, 1, 0},
    {"mixed host -> cpu", CPU, CPU, 0, 0, 0, 0},
    {"pinned host -> cuda:0", CPU, 0, 0, 0, 0, 1},
    {"example batch pinned host -> cuda:0", CPU, 0, 0, 1, 0, 1},
    {"flagged pageable host -> cuda:0", CPU, 0, 0, 0, 0, 2},
    {"cuda:0 -> cuda:0 (reused)", 0, 0, 0, 0, 0, 0},
    {"cuda:0 -> cpu", 0, CPU, 0, 0, 0, 0},
    {"example batch cuda:0 -> cpu", 0, CPU, 0, 1, 0, 0},
    {"cuda:0 -> cuda:1", 0, 1, 0, 0, 0, 0},
    {"into host -> cuda:0", CPU, 0, 1, 0, 0, 0},
    {"into example batch host -> cuda:0", CPU, 0, 1, 1, 0, 0},
    {"into strided host -> cuda:0", CPU, 0, 1, 0, 1, 0},
    {"into pinned host -> cuda:0", CPU, 0, 1, 0, 0, 1},
    {"into cuda:0 -> cpu", 0, CPU, 1, 0, 0, 0},
    {"into cuda:0 -> cuda:0", 0, 0, 1, 0, 0, 0},
    {"into cuda:0 -> cuda:1", 0, 1, 1, 0, 0, 0},
    {"into host -> cpu", CPU, CPU, 1, 0, 0, 0},
};

int main(int argc, char **argv) {
  const char *driver = driver_argument(argc, argv, SUITE);
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  (void)driver; /* NULL on a CUDA host: the real driver */
  if (mtc_cuda_device_count(&device_count) != MTC_OK) device_count = 0;
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const shape *s = &shapes[k];
    int needs = s->source > s->target ? s->source + 1 : s->target + 1;
    if (needs > device_count || (s->pinned == 1 && device_count == 0)) {
      check_skip(s->name, "needs more CUDA devices");
      continue;
    }
    for (uint32_t background = 0; background < 2; background++) run_shape(s, background);
  }
  return check_summary(SUITE);
}
