/* planner.c — greedy chunk packing. */
#include "layout/planner.h"

#include <stdlib.h>
#include <string.h>

int mtc_planner_packable(const mtc_leaf *leaf, const mtc_options *options) {
  if (leaf->bytes > options->pack_threshold_bytes) return 0;
  if (leaf->bytes > options->max_packed_chunk_bytes) return 0;
  if (leaf->flags & MTC_LEAF_NO_PACK) return 0;
  if (leaf->device == MTC_DEVICE_CPU && !options->pack_cpu_tensors) return 0;
  return 1;
}

static uint64_t align_up(uint64_t value, uint64_t alignment) {
  /* A division per leaf was most of the layout's time for 10,000 leaves;
   * alignments are powers of two, whose rounding needs none. */
  if ((alignment & (alignment - 1)) == 0) {
    return (value + alignment - 1) & ~(alignment - 1);
  }
  return (value + alignment - 1) / alignment * alignment;
}

uint64_t mtc_planner_alignment(uint64_t min_alignment, uint32_t element_size) {
  uint64_t a = min_alignment > element_size ? min_alignment : element_size;
  return align_up(a, element_size);
}

/* The chunk being filled for one source device. */
typedef struct open_chunk {
  int32_t source_device;
  size_t chunk; /* index in layout->chunks */
} open_chunk;

static int add_chunk(mtc_layout *layout, size_t *capacity,
                     int32_t source_device) {
  if (layout->chunk_count == *capacity) {
    size_t grown = *capacity ? *capacity * 2 : 8;
    mtc_chunk *chunks = realloc(layout->chunks, grown * sizeof *chunks);
    if (chunks == NULL) return -1;
    layout->chunks = chunks;
    *capacity = grown;
  }
  mtc_chunk *chunk = &layout->chunks[layout->chunk_count++];
  chunk->source_device = source_device;
  chunk->bytes = 0;
  chunk->leaf_count = 0;
  chunk->direct_address = 0;
  return 0;
}

/* The direct run being extended in one pinned region: [low, high). */
typedef struct open_run {
  uint64_t region;
  size_t chunk;
  uint64_t low, high;
} open_run;

typedef struct direct_runs {
  open_run *open;
  size_t count, capacity;
  size_t last; /* the run the previous leaf joined: the next likely does */
} direct_runs;

/* Does [low, high) of `region` lie within MTC_DIRECT_GAP_BYTES of run? */
static int run_near(const open_run *run, const mtc_region *region,
                    uint64_t low, uint64_t high) {
  return run->region == region->begin &&
         high + MTC_DIRECT_GAP_BYTES >= run->low &&
         low <= run->high + MTC_DIRECT_GAP_BYTES;
}

/* Places a leaf of `region` into a direct run (its offset is its host
 * address until finish_runs); -1 when out of memory. */
static int place_direct(mtc_layout *layout, size_t *chunk_capacity,
                        direct_runs *runs, const mtc_leaf *leaf,
                        const mtc_region *region, mtc_placement *place) {
  uint64_t low = leaf->address & ~(uint64_t)(MTC_DIRECT_ALIGNMENT - 1);
  if (low < region->begin) low = region->begin;
  uint64_t high = leaf->address + leaf->bytes;
  open_run *run = NULL;
  if (runs->count > 0 && run_near(&runs->open[runs->last], region, low, high)) {
    run = &runs->open[runs->last];
  }
  for (size_t k = 0; run == NULL && k < runs->count; k++) {
    if (run_near(&runs->open[k], region, low, high)) {
      run = &runs->open[k];
      runs->last = k;
    }
  }
  if (run == NULL) {
    if (add_chunk(layout, chunk_capacity, MTC_DEVICE_CPU) != 0) return -1;
    if (runs->count == runs->capacity) {
      size_t grown = runs->capacity ? runs->capacity * 2 : 4;
      open_run *more = realloc(runs->open, grown * sizeof *more);
      if (more == NULL) return -1;
      runs->open = more;
      runs->capacity = grown;
    }
    runs->last = runs->count++;
    run = &runs->open[runs->last];
    run->region = region->begin;
    run->chunk = layout->chunk_count - 1;
    run->low = low;
    run->high = high;
  }
  if (low < run->low) run->low = low;
  if (high > run->high) run->high = high;
  mtc_chunk *chunk = &layout->chunks[run->chunk];
  chunk->leaf_count++;
  chunk->direct_address = run->low;
  chunk->bytes = run->high - run->low;
  place->kind = MTC_PLACE_PACKED;
  place->chunk = (uint32_t)run->chunk;
  place->offset = leaf->address;
  return 0;
}

/* Direct leaves' offsets become distances from their run's start. */
static void finish_runs(mtc_layout *layout) {
  for (size_t i = 0; i < layout->leaf_count; i++) {
    mtc_placement *place = &layout->placements[i];
    if (place->kind != MTC_PLACE_PACKED) continue;
    const mtc_chunk *chunk = &layout->chunks[place->chunk];
    if (chunk->direct_address != 0) place->offset -= chunk->direct_address;
  }
}

/* reuse: leaves already on the target are placed REUSED (else copied). */
static mtc_status layout(const mtc_leaf *leaves, size_t count,
                         int32_t target_device, const mtc_options *options,
                         int reuse, const mtc_region *regions,
                         mtc_layout *out) {
  memset(out, 0, sizeof *out);
  out->placements = calloc(count ? count : 1, sizeof *out->placements);
  if (out->placements == NULL) return MTC_ERR_OUT_OF_MEMORY;
  out->leaf_count = count;

  size_t chunk_capacity = 0;
  /* Source devices are few: a small array of open chunks is enough. */
  open_chunk *open = NULL;
  size_t open_count = 0, open_capacity = 0;
  direct_runs runs = {NULL, 0, 0, 0};

  for (size_t i = 0; i < count; i++) {
    const mtc_leaf *leaf = &leaves[i];
    mtc_placement *place = &out->placements[i];
    if (leaf->bytes == 0) {
      place->kind = MTC_PLACE_ZERO;
      continue;
    }
    if (reuse && leaf->device == target_device && leaf->row_count <= 1 &&
        !(leaf->flags & MTC_LEAF_STRIDED_INTERNAL)) {
      place->kind = MTC_PLACE_REUSED;
      continue;
    }
    if (regions != NULL && regions[i].begin != 0 &&
        leaf->device == MTC_DEVICE_CPU && target_device != MTC_DEVICE_CPU &&
        leaf->row_count <= 1 && !(leaf->flags & MTC_LEAF_STRIDED_INTERNAL)) {
      if (place_direct(out, &chunk_capacity, &runs, leaf, &regions[i],
                       place) != 0) {
        goto out_of_memory;
      }
      continue;
    }
    if (!mtc_planner_packable(leaf, options)) {
      place->kind = MTC_PLACE_OWN;
      out->own_count++;
      continue;
    }

    size_t slot = 0;
    while (slot < open_count && open[slot].source_device != leaf->device) {
      slot++;
    }
    if (slot == open_count) {
      if (open_count == open_capacity) {
        size_t grown = open_capacity ? open_capacity * 2 : 4;
        open_chunk *more = realloc(open, grown * sizeof *more);
        if (more == NULL) goto out_of_memory;
        open = more;
        open_capacity = grown;
      }
      if (add_chunk(out, &chunk_capacity, leaf->device) != 0) {
        goto out_of_memory;
      }
      open[slot].source_device = leaf->device;
      open[slot].chunk = out->chunk_count - 1;
      open_count++;
    }

    uint64_t alignment = mtc_planner_alignment(options->min_packed_alignment_bytes,
                                               leaf->element_size);
    mtc_chunk *chunk = &out->chunks[open[slot].chunk];
    uint64_t offset = align_up(chunk->bytes, alignment);
    if (offset + leaf->bytes > options->max_packed_chunk_bytes &&
        chunk->leaf_count > 0) {
      if (add_chunk(out, &chunk_capacity, leaf->device) != 0) {
        goto out_of_memory;
      }
      open[slot].chunk = out->chunk_count - 1;
      chunk = &out->chunks[open[slot].chunk];
      offset = 0;
    }
    chunk->bytes = offset + leaf->bytes;
    chunk->leaf_count++;
    place->kind = MTC_PLACE_PACKED;
    place->chunk = (uint32_t)open[slot].chunk;
    place->offset = offset;
  }
  free(open);
  free(runs.open);
  if (runs.count > 0) finish_runs(out);
  return MTC_OK;

out_of_memory:
  free(open);
  free(runs.open);
  mtc_layout_free(out);
  return MTC_ERR_OUT_OF_MEMORY;
}

mtc_status mtc_planner_layout(const mtc_leaf *leaves, size_t count,
                              int32_t target_device,
                              const mtc_options *options,
                              const mtc_region *regions, mtc_layout *out) {
  return layout(leaves, count, target_device, options, 1, regions, out);
}

mtc_status mtc_planner_layout_into(const mtc_leaf *leaves, size_t count,
                                   const mtc_options *options,
                                   mtc_layout *out) {
  return layout(leaves, count, 0, options, 0, NULL, out);
}

void mtc_layout_free(mtc_layout *layout) {
  if (layout == NULL) return;
  free(layout->placements);
  free(layout->chunks);
  memset(layout, 0, sizeof *layout);
}

void mtc_layout_count(const mtc_layout *layout, const mtc_leaf *leaves,
                      mtc_layout_counts *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < layout->leaf_count; i++) {
    const mtc_placement *place = &layout->placements[i];
    switch (place->kind) {
      case MTC_PLACE_REUSED:
        out->reused++;
        break;
      case MTC_PLACE_PACKED:
        out->packed++;
        out->direct += layout->chunks[place->chunk].direct_address != 0;
        out->bytes += leaves[i].bytes;
        break;
      case MTC_PLACE_OWN:
        out->bytes += leaves[i].bytes;
        break;
      case MTC_PLACE_ZERO:
        break;
    }
  }
}

mtc_status mtc_layout_copy(const mtc_layout *from, mtc_layout *out) {
  *out = *from;
  size_t placements = (from->leaf_count ? from->leaf_count : 1) * sizeof *from->placements;
  out->placements = malloc(placements);
  out->chunks = from->chunk_count ? malloc(from->chunk_count * sizeof *from->chunks) : NULL;
  if (out->placements == NULL || (from->chunk_count > 0 && out->chunks == NULL)) {
    mtc_layout_free(out);
    return MTC_ERR_OUT_OF_MEMORY;
  }
  memcpy(out->placements, from->placements, from->leaf_count * sizeof *from->placements);
  if (from->chunk_count > 0) {
    memcpy(out->chunks, from->chunks, from->chunk_count * sizeof *from->chunks);
  }
  return MTC_OK;
}
