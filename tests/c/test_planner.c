/* test_planner.c — the layout rules of planner.h, with no CUDA involved. */
#include "check.h"
#include "base/options.h"
#include "layout/planner.h"

static mtc_leaf host_leaf(uint64_t bytes, uint32_t element_size) {
  mtc_leaf leaf = {0};
  leaf.address = 0x10000;
  leaf.bytes = bytes;
  leaf.device = MTC_DEVICE_CPU;
  leaf.element_size = element_size;
  return leaf;
}

static mtc_options options_with(uint64_t alignment, uint64_t chunk) {
  mtc_options o = MTC_OPTIONS_INIT;
  o.min_packed_alignment_bytes = alignment;
  o.max_packed_chunk_bytes = chunk;
  return o;
}

static void test_alignment_per_dtype(void) {
  const uint64_t alignments[] = {1, 16, 64, 4096, 3, 6, 100, 4095};
  const uint32_t sizes[] = {1, 2, 4, 8, 16};
  for (size_t a = 0; a < 8; a++) {
    for (size_t s = 0; s < 5; s++) {
      /* A 3-byte leaf first, so the next one starts at an odd cursor. */
      mtc_leaf leaves[3] = {host_leaf(3, 1), host_leaf(sizes[s] * 5, sizes[s]),
                            host_leaf(sizes[s] * 7, sizes[s])};
      mtc_options o = options_with(alignments[a], 1 << 20);
      mtc_layout layout;
      CHECK_OK(mtc_planner_layout(leaves, 3, 0, &o, NULL, &layout));
      uint64_t align = alignments[a] > sizes[s] ? alignments[a] : sizes[s];
      align = (align + sizes[s] - 1) / sizes[s] * sizes[s];
      CHECK_EQ_U64(mtc_planner_alignment(alignments[a], sizes[s]), align);
      CHECK_EQ_U64(layout.chunk_count, 1);
      CHECK(layout.placements[0].kind == MTC_PLACE_PACKED);
      CHECK_EQ_U64(layout.placements[0].offset, 0);
      CHECK_EQ_U64(layout.placements[1].offset, (3 + align - 1) / align * align);
      uint64_t end1 = layout.placements[1].offset + leaves[1].bytes;
      CHECK_EQ_U64(layout.placements[2].offset,
                   (end1 + align - 1) / align * align);
      CHECK_EQ_U64(layout.chunks[0].bytes,
                   layout.placements[2].offset + leaves[2].bytes);
      CHECK_EQ_U64(layout.chunks[0].leaf_count, 3);
      mtc_layout_free(&layout);
    }
  }
}

static void test_chunking(void) {
  /* 10 leaves of 100 bytes, 16-byte alignment (stride 112), chunk 350:
   * three fit (0, 112, 224 -> end 324), the fourth would end at 436. */
  mtc_leaf leaves[10];
  for (int i = 0; i < 10; i++) leaves[i] = host_leaf(100, 4);
  mtc_options o = options_with(16, 350);
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 10, 0, &o, NULL, &layout));
  CHECK_EQ_U64(layout.chunk_count, 4);
  for (int i = 0; i < 10; i++) {
    CHECK(layout.placements[i].kind == MTC_PLACE_PACKED);
    CHECK_EQ_U64(layout.placements[i].chunk, i / 3);
    CHECK_EQ_U64(layout.placements[i].offset, (i % 3) * 112);
  }
  CHECK_EQ_U64(layout.chunks[0].bytes, 324);
  CHECK_EQ_U64(layout.chunks[3].bytes, 100);
  CHECK_EQ_U64(layout.chunks[3].leaf_count, 1);
  mtc_layout_free(&layout);

  /* A leaf ending exactly at the limit still fits. */
  mtc_leaf exact[2] = {host_leaf(100, 1), host_leaf(156, 1)};
  o = options_with(16, 268);
  CHECK_OK(mtc_planner_layout(exact, 2, 0, &o, NULL, &layout));
  CHECK_EQ_U64(layout.chunk_count, 1);
  CHECK_EQ_U64(layout.placements[1].offset, 112);
  CHECK_EQ_U64(layout.chunks[0].bytes, 268);
  mtc_layout_free(&layout);
}

static void test_mixed_dtypes(void) {
  mtc_leaf leaves[5] = {host_leaf(1, 1), host_leaf(8, 8), host_leaf(2, 2),
                        host_leaf(16, 16), host_leaf(12, 4)};
  mtc_options o = options_with(1, 1 << 20);
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 5, 0, &o, NULL, &layout));
  CHECK_EQ_U64(layout.chunk_count, 1);
  const uint64_t expected[5] = {0, 8, 16, 32, 48};
  for (int i = 0; i < 5; i++) {
    CHECK(layout.placements[i].kind == MTC_PLACE_PACKED);
    CHECK_EQ_U64(layout.placements[i].offset, expected[i]);
  }
  CHECK_EQ_U64(layout.chunks[0].bytes, 60);
  mtc_layout_free(&layout);
}

static void test_own_and_zero(void) {
  mtc_leaf leaves[4] = {host_leaf(64, 4), host_leaf(2000, 4),
                        host_leaf(0, 4), host_leaf(64, 4)};
  leaves[2].address = 0;
  mtc_options o = options_with(16, 1000);
  o.pack_threshold_bytes = 4096; /* the 2000-byte leaf is under it */
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 4, 0, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_PACKED);
  CHECK(layout.placements[1].kind == MTC_PLACE_OWN); /* larger than a chunk */
  CHECK(layout.placements[2].kind == MTC_PLACE_ZERO);
  CHECK(layout.placements[3].kind == MTC_PLACE_PACKED);
  CHECK_EQ_U64(layout.placements[3].offset, 64);
  CHECK_EQ_U64(layout.chunk_count, 1);
  CHECK_EQ_U64(layout.own_count, 1);
  mtc_layout_free(&layout);

  /* Zero-byte leaves on the target are still ZERO, not REUSED. */
  mtc_leaf zero = host_leaf(0, 1);
  CHECK_OK(mtc_planner_layout(&zero, 1, MTC_DEVICE_CPU, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_ZERO);
  mtc_layout_free(&layout);

  /* No leaves at all. */
  CHECK_OK(mtc_planner_layout(NULL, 0, 0, &o, NULL, &layout));
  CHECK_EQ_U64(layout.chunk_count, 0);
  mtc_layout_free(&layout);
}

static void test_packing_switches(void) {
  mtc_leaf leaves[3] = {host_leaf(64, 4), host_leaf(64, 4), host_leaf(64, 4)};
  leaves[1].flags = MTC_LEAF_NO_PACK;
  mtc_options o = MTC_OPTIONS_INIT;
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 3, 0, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_PACKED);
  CHECK(layout.placements[1].kind == MTC_PLACE_OWN);
  CHECK(layout.placements[2].kind == MTC_PLACE_PACKED);
  CHECK_EQ_U64(layout.placements[2].offset, 64);
  mtc_layout_free(&layout);

  o.pack_cpu_tensors = 0;
  CHECK_OK(mtc_planner_layout(leaves, 3, 0, &o, NULL, &layout));
  for (int i = 0; i < 3; i++) CHECK(layout.placements[i].kind == MTC_PLACE_OWN);
  CHECK_EQ_U64(layout.chunk_count, 0);
  mtc_layout_free(&layout);

  /* pack_cpu_tensors concerns host leaves only: device leaves still pack. */
  mtc_leaf device_leaves[2] = {host_leaf(64, 4), host_leaf(64, 4)};
  device_leaves[0].device = device_leaves[1].device = 1;
  CHECK_OK(mtc_planner_layout(device_leaves, 2, 0, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_PACKED);
  CHECK(layout.placements[1].kind == MTC_PLACE_PACKED);
  CHECK_EQ_U64(layout.chunk_count, 1);
  mtc_layout_free(&layout);
}

static void test_threshold_boundary(void) {
  mtc_options o = MTC_OPTIONS_INIT;
  mtc_leaf leaves[2] = {host_leaf(o.pack_threshold_bytes, 1),
                        host_leaf(o.pack_threshold_bytes + 1, 1)};
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 2, 0, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_PACKED);
  CHECK(layout.placements[1].kind == MTC_PLACE_OWN);
  mtc_layout_free(&layout);
}

static void test_reuse_and_grouping(void) {
  /* Leaves on host, cuda:0, cuda:1, interleaved; target cuda:0. */
  mtc_leaf leaves[6] = {host_leaf(10, 1), host_leaf(10, 1), host_leaf(10, 1),
                        host_leaf(10, 1), host_leaf(10, 1), host_leaf(10, 1)};
  leaves[1].device = 1;
  leaves[2].device = 0; /* on the target: reused */
  leaves[3].device = 1;
  leaves[5].device = 2;
  mtc_options o = MTC_OPTIONS_INIT;
  mtc_layout layout;
  CHECK_OK(mtc_planner_layout(leaves, 6, 0, &o, NULL, &layout));
  CHECK(layout.placements[2].kind == MTC_PLACE_REUSED);
  CHECK_EQ_U64(layout.chunk_count, 3);
  /* Chunks open in order of first appearance: host, cuda:1, cuda:2. */
  CHECK_EQ_U64(layout.placements[0].chunk, layout.placements[4].chunk);
  CHECK_EQ_U64(layout.placements[1].chunk, layout.placements[3].chunk);
  CHECK(layout.placements[0].chunk != layout.placements[1].chunk);
  CHECK(layout.placements[5].chunk != layout.placements[0].chunk);
  CHECK(layout.placements[5].chunk != layout.placements[1].chunk);
  CHECK(layout.chunks[layout.placements[0].chunk].source_device == MTC_DEVICE_CPU);
  CHECK(layout.chunks[layout.placements[1].chunk].source_device == 1);
  CHECK(layout.chunks[layout.placements[5].chunk].source_device == 2);
  CHECK_EQ_U64(layout.placements[4].offset, 16);
  CHECK_EQ_U64(layout.placements[3].offset, 16);
  mtc_layout_free(&layout);

  /* Host target: contiguous host leaves are reused, strided ones are not. */
  mtc_leaf host[2] = {host_leaf(64, 4), host_leaf(64, 4)};
  host[1].row_count = 4;
  host[1].row_pitch = 32;
  CHECK_OK(mtc_planner_layout(host, 2, MTC_DEVICE_CPU, &o, NULL, &layout));
  CHECK(layout.placements[0].kind == MTC_PLACE_REUSED);
  CHECK(layout.placements[1].kind == MTC_PLACE_PACKED);
  mtc_layout_free(&layout);
}

/* xorshift64*: a fixed-seed generator so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static void test_random_invariants(void) {
  static const uint32_t sizes[] = {1, 2, 4, 8, 16};
  int bad = 0;
  for (int round = 0; round < 3000 && !bad; round++) {
    size_t count = 1 + rng() % 200;
    mtc_leaf leaves[200];
    mtc_options o = MTC_OPTIONS_INIT;
    o.min_packed_alignment_bytes =
        rng() % 2 ? (uint64_t)1 << (rng() % 13) : 1 + rng() % 4096;
    o.max_packed_chunk_bytes = 1 + rng() % 20000;
    o.pack_threshold_bytes = rng() % 30000;
    o.pack_cpu_tensors = rng() % 8 != 0;
    int32_t target = (int32_t)(rng() % 3) - 1;
    for (size_t i = 0; i < count; i++) {
      leaves[i] = host_leaf(rng() % 5 == 0 ? 0 : rng() % 12000,
                            sizes[rng() % 5]);
      leaves[i].device = (int32_t)(rng() % 4) - 1;
      if (rng() % 10 == 0) leaves[i].flags = MTC_LEAF_NO_PACK;
    }
    mtc_layout layout;
    CHECK_OK(mtc_planner_layout(leaves, count, target, &o, NULL, &layout));
    uint64_t packed_in_chunk[200] = {0};
    for (size_t i = 0; i < count && !bad; i++) {
      const mtc_leaf *leaf = &leaves[i];
      const mtc_placement *p = &layout.placements[i];
      mtc_placement_kind expected;
      if (leaf->bytes == 0) {
        expected = MTC_PLACE_ZERO;
      } else if (leaf->device == target) {
        expected = MTC_PLACE_REUSED;
      } else if (mtc_planner_packable(leaf, &o)) {
        expected = MTC_PLACE_PACKED;
      } else {
        expected = MTC_PLACE_OWN;
      }
      if (p->kind != expected) bad = 1;
      if (p->kind != MTC_PLACE_PACKED) continue;
      uint64_t align = o.min_packed_alignment_bytes > leaf->element_size
                           ? o.min_packed_alignment_bytes
                           : leaf->element_size;
      align = (align + leaf->element_size - 1) / leaf->element_size * leaf->element_size;
      const mtc_chunk *chunk = &layout.chunks[p->chunk];
      if (p->offset % align != 0) bad = 2;
      if (p->offset + leaf->bytes > chunk->bytes) bad = 3;
      if (chunk->bytes > o.max_packed_chunk_bytes) bad = 4;
      if (chunk->source_device != leaf->device) bad = 5;
      packed_in_chunk[p->chunk]++;
      /* No overlap with any other leaf of the same chunk. */
      for (size_t j = 0; j < i; j++) {
        const mtc_placement *q = &layout.placements[j];
        if (q->kind != MTC_PLACE_PACKED || q->chunk != p->chunk) continue;
        if (q->offset < p->offset + leaf->bytes &&
            p->offset < q->offset + leaves[j].bytes) {
          bad = 6;
        }
        if (q->offset >= p->offset) bad = 7; /* leaf order inside a chunk */
      }
    }
    for (size_t c = 0; c < layout.chunk_count && !bad; c++) {
      if (layout.chunks[c].leaf_count == 0 ||
          layout.chunks[c].leaf_count != packed_in_chunk[c]) {
        bad = 8;
      }
    }
    if (bad) printf("random round %d: invariant %d broken\n", round, bad);
    mtc_layout_free(&layout);
  }
  CHECK(bad == 0);
}

static void test_options_normalize(void) {
  mtc_options out;
  CHECK_OK(mtc_options_normalize(NULL, &out));
  CHECK_EQ_U64(out.max_packed_chunk_bytes, (uint64_t)32 << 20);
  CHECK_EQ_U64(out.pack_threshold_bytes, (uint64_t)256 << 10);
  CHECK_EQ_U64(out.min_packed_alignment_bytes, 16);
  CHECK_EQ_U64(out.staging_piece_bytes, (uint64_t)8 << 20);
  CHECK(out.use_pinned_staging && out.pack_cpu_tensors &&
        out.use_background_thread);
}

int main(void) {
  test_alignment_per_dtype();
  test_chunking();
  test_mixed_dtypes();
  test_own_and_zero();
  test_packing_switches();
  test_threshold_boundary();
  test_reuse_and_grouping();
  test_random_invariants();
  test_options_normalize();
  return check_summary("test_planner");
}
