/* prepared_tables.c — a prepared copy into device memory keeps its scatter
 * tables on the target: its destinations and packing offsets never change,
 * so each copy stages and sends only the leaves' bytes and launches the
 * scatter kernel over the table written here once. */
#include "plan/prepared_tables.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cuda/kernels.h"
#include "run/into_scatter.h"

/* Fills `table` (one entry per packed member, zeroed); the number of
 * entries written. */
static uint64_t fill(mtc_segment *table, const mtc_layout *layout,
                     const mtc_leaf *leaves, const mtc_leaf *destinations,
                     uint64_t leaf_count, const uint64_t *first) {
  uint64_t *next = calloc(layout->chunk_count + 1, sizeof *next);
  if (next == NULL) return 0;
  uint64_t written = 0;
  for (uint64_t i = 0; i < leaf_count; i++) {
    const mtc_placement *place = &layout->placements[i];
    if (place->kind != MTC_PLACE_PACKED) continue;
    const mtc_chunk *chunk = &layout->chunks[place->chunk];
    uint64_t m = first[place->chunk] + next[place->chunk]++;
    if (chunk->source_device != MTC_DEVICE_CPU ||
        chunk->leaf_count < MTC_INTO_KERNEL_MIN_LEAVES) {
      continue;
    }
    table[m].src = place->offset;
    table[m].dst = destinations[i].address;
    table[m].bytes = leaves[i].bytes;
    written++;
  }
  free(next);
  return written;
}

/* The table, written to a new block of the target's; NULL on failure. */
static mtc_block *upload(int32_t target, const mtc_segment *table,
                         uint64_t bytes) {
  const mtc_cuda_api *cu;
  mtc_device *device;
  if (mtc_cuda_load(&cu) != MTC_OK || mtc_device_get(target, &device) != MTC_OK ||
      !mtc_kernels_available(device)) {
    return NULL;
  }
  mtc_block *block = NULL;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  mtc_status status = mtc_context_scope_use(&scope, device);
  if (status == MTC_OK) status = mtc_block_new_device(device, bytes, &block);
  if (status == MTC_OK) {
    /* Pool memory is ordered on the copy stream: wait, so that a copy on
     * any stream may read the table. */
    CUresult r = cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)block->address, table,
                                          (size_t)bytes, device->stream);
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(device->stream);
    if (r != CUDA_SUCCESS) status = MTC_ERR_CUDA;
  }
  mtc_context_scope_end(&scope);
  if (status != MTC_OK) {
    mtc_block_release(block);
    return NULL;
  }
  return block;
}

mtc_block *mtc_prepared_tables_make(int32_t target, const mtc_layout *layout,
                                    const mtc_leaf *leaves,
                                    const mtc_leaf *destinations,
                                    uint64_t leaf_count) {
  if (target == MTC_DEVICE_CPU || destinations == NULL || layout->chunk_count == 0) {
    return NULL;
  }
  uint64_t *first = calloc(layout->chunk_count + 1, sizeof *first);
  if (first == NULL) return NULL;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    first[c + 1] = first[c] + layout->chunks[c].leaf_count;
  }
  uint64_t members = first[layout->chunk_count];
  mtc_segment *table = calloc(members ? members : 1, sizeof *table);
  mtc_block *block = NULL;
  if (table != NULL &&
      fill(table, layout, leaves, destinations, leaf_count, first) > 0) {
    /* Probing the device and the kernels must not clobber the caller's
     * last error: the tables are a saving, never a failure. */
    char saved[MTC_ERROR_CAPACITY];
    mtc_format(saved, sizeof saved, "%s", mtc_error_text());
    block = upload(target, table, members * sizeof *table);
    mtc_error_set_text(MTC_OK, saved);
  }
  free(table);
  free(first);
  return block;
}
