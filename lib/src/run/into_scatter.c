/* into_scatter.c — host leaves into existing device memory: a chunk's
 * packed leaves staged into pinned memory with a table of where each goes
 * (or, for a prepared copy, with its table kept on the device), one DMA
 * into a scratch block of the target and one scatter launch that places
 * them; a small chunk is read by the kernel where it was staged. */
#include "run/into_scatter.h"

#include <stdlib.h>

#include "base/error.h"
#include "cuda/kernels.h"
#include "run/directions.h"
#include "run/staging.h"

/* A staged chunk (with its table) up to this size is read by the scatter
 * kernel where it lies, in pinned memory, which is device-addressable under
 * unified addressing: no scratch block and no DMA before the launch, which
 * for a decode step's few KiB cost more than the reads over PCIe. Larger
 * chunks go over by DMA first, at the bus's full rate. */
#define MTC_INTO_DIRECT_MAX_BYTES ((uint64_t)64 << 10)

mtc_status mtc_into_enter_target(mtc_transfer *t, mtc_device **target) {
  mtc_status status = mtc_transfer_enter_device(t, t->plan->target, target);
  if (status != MTC_OK) return status;
  return mtc_transfer_order_after_source(t, *target, t->plan->target);
}

/* Host memory the chunk is staged into: pinned, or malloc'd with pinned
 * staging off; kept by the plan until the copy is over. */
static mtc_status host_staging(mtc_transfer *t, mtc_device *target,
                               uint64_t bytes, unsigned char **out) {
  if (t->plan->options.use_pinned_staging) {
    mtc_pinned_buffer buffer;
    mtc_status status = mtc_transfer_acquire_staging(t, target, (size_t)bytes, &buffer);
    if (status != MTC_OK) return status;
    *out = buffer.ptr;
    return MTC_OK;
  }
  *out = malloc((size_t)bytes);
  if (*out == NULL) return mtc_out_of_host_memory();
  mtc_plan_keep_host(t->plan, *out);
  return MTC_OK;
}

/* The scatter table of a prepared copy (plan/prepared_tables.c) for the
 * packed leaves from member `first` on, already on the device: 0 when the
 * plan has none or was laid out afresh at submit. */
static uint64_t resident_table(const mtc_plan *plan, uint64_t first) {
  const mtc_block *tables = plan->prepared.scatter_tables;
  if (tables == NULL || !plan->prepared.laid_out) return 0;
  return tables->address + first * sizeof(mtc_segment);
}

mtc_status mtc_into_scatter_chunk(mtc_transfer *t, size_t c,
                                  const mtc_chunk_members *all, uint64_t first) {
  mtc_plan *plan = t->plan;
  const mtc_chunk *chunk = &plan->layout.chunks[c];
  const uint64_t *members = &all->leaves[first];
  uint64_t count = all->first[c + 1] - first;
  mtc_device *target;
  mtc_status status = mtc_into_enter_target(t, &target);
  if (status != MTC_OK) return status;
  uint64_t resident = resident_table(plan, first);
  uint64_t table_offset = (chunk->bytes + 7) / 8 * 8;
  uint64_t total = resident ? chunk->bytes : table_offset + count * sizeof(mtc_segment);
  int scatter = count >= MTC_INTO_KERNEL_MIN_LEAVES && count <= UINT32_MAX &&
                total <= plan->staging_max_bytes &&
                mtc_kernels_available(target);
  unsigned char *staged;
  uint64_t begin = mtc_trace_now(t->trace);
  status = host_staging(t, target, scatter ? total : chunk->bytes, &staged);
  if (status != MTC_OK) return status;
  mtc_trace_span(t->trace, "alloc", "chunk", (int64_t)c, chunk->bytes, begin);
  begin = mtc_trace_now(t->trace);
  status = mtc_transfer_stage_chunk(t, members, count, staged);
  if (status != MTC_OK) return status;
  mtc_trace_span(t->trace, "stage", "chunk", (int64_t)c, chunk->bytes, begin);

  if (!scatter) {
    t->stats->copies_issued += count;
    for (uint64_t k = 0; k < count; k++) {
      uint64_t leaf = members[k];
      begin = mtc_trace_now(t->trace);
      status = mtc_cuda_check(
          t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)mtc_into_destination(plan, leaf),
                                      staged + plan->layout.placements[leaf].offset,
                                      (size_t)plan->leaves[leaf].bytes,
                                      target->stream),
          "cuMemcpyHtoDAsync");
      if (status != MTC_OK) return status;
      mtc_trace_dma(t->trace, target, "leaf", (int64_t)leaf, plan->leaves[leaf].bytes, begin);
    }
    return MTC_OK;
  }
  mtc_segments_size size = {0, 0, 0};
  mtc_segment *table = resident ? NULL : (mtc_segment *)(staged + table_offset);
  for (uint64_t k = 0; k < count; k++) {
    uint64_t leaf = members[k];
    mtc_segments_size_add(&size, plan->leaves[leaf].bytes);
    if (resident) continue;
    table[k].src = plan->layout.placements[leaf].offset;
    table[k].dst = mtc_into_destination(plan, leaf);
    table[k].bytes = plan->leaves[leaf].bytes;
  }
  if (plan->options.use_pinned_staging && total <= MTC_INTO_DIRECT_MAX_BYTES) {
    t->stats->copies_issued++;
    uint64_t base = (uint64_t)(uintptr_t)staged;
    begin = mtc_trace_now(t->trace);
    status = mtc_kernels_scatter_segments(target, target->stream, base,
                                          resident ? resident : base + table_offset,
                                          &size, (uint32_t)count);
    if (status == MTC_OK) mtc_trace_launch(t->trace, target, "scatter", count, chunk->bytes, begin);
    return status;
  }
  mtc_block *scratch;
  status = mtc_block_new_device(target, total, &scratch);
  if (status != MTC_OK) return status;
  mtc_plan_keep_block(plan, scratch);
  t->stats->copies_issued += 2;
  begin = mtc_trace_now(t->trace);
  status = mtc_cuda_check(t->cu->cuMemcpyHtoDAsync_v2((CUdeviceptr)scratch->address,
                                                      staged, (size_t)total,
                                                      target->stream),
                          "cuMemcpyHtoDAsync");
  if (status != MTC_OK) return status;
  mtc_trace_dma(t->trace, target, "chunk", (int64_t)c, total, begin);
  begin = mtc_trace_now(t->trace);
  status = mtc_kernels_scatter_segments(target, target->stream, scratch->address,
                                        resident ? resident : scratch->address + table_offset,
                                        &size, (uint32_t)count);
  if (status == MTC_OK) mtc_trace_launch(t->trace, target, "scatter", count, chunk->bytes, begin);
  return status;
}

