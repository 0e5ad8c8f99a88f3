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

/* Fills `table` (one entry per packed member, zeroed) for the host chunks
 * that a scatter launch copies; the number of entries written. */
static uint64_t fill(mtc_segment *table, const mtc_layout *layout,
                     const mtc_leaf *leaves, const mtc_leaf *destinations,
                     const mtc_chunk_members *members) {
  uint64_t written = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    const mtc_chunk *chunk = &layout->chunks[c];
    if (chunk->source_device != MTC_DEVICE_CPU ||
        chunk->leaf_count < MTC_INTO_KERNEL_MIN_LEAVES) {
      continue;
    }
    for (uint64_t m = members->first[c]; m < members->first[c + 1]; m++) {
      uint64_t leaf = members->leaves[m];
      table[m].src = layout->placements[leaf].offset;
      table[m].dst = destinations[leaf].address;
      table[m].bytes = leaves[leaf].bytes;
      written++;
    }
  }
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
  /* Nothing here may clobber the caller's last error: the tables are a
   * saving, never a failure. */
  char saved[MTC_ERROR_CAPACITY];
  mtc_format(saved, sizeof saved, "%s", mtc_error_text());
  mtc_chunk_members members = {NULL, NULL};
  mtc_segment *table = NULL;
  mtc_block *block = NULL;
  uint64_t entries = 0;
  if (mtc_chunk_members_of(layout, leaf_count, &members) == MTC_OK) {
    entries = members.first[layout->chunk_count];
    table = calloc(entries ? entries : 1, sizeof *table);
  }
  if (table != NULL && fill(table, layout, leaves, destinations, &members) > 0) {
    block = upload(target, table, entries * sizeof *table);
  }
  mtc_error_set_text(MTC_OK, saved);
  free(table);
  free(members.first);
  free(members.leaves);
  return block;
}
