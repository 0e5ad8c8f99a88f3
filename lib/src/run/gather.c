/* gather.c — many small leaves of one GPU in one kernel launch: the
 * segment-copy kernel (cuda/) reads every packed leaf of a source device and
 * writes it into the output blocks, pinned host blocks (device -> host) or
 * the target's device blocks over peer access (device -> device).
 *
 * Why the kernel writes into pinned memory directly (device -> host) rather
 * than into a device scratch block followed by one DMA: pinned memory is
 * device-addressable under unified addressing, and writing it from the
 * kernel saves a scratch allocation, a second operation on the stream and
 * its latency; the leaves it handles are small (packed), so the copy is
 * dominated by launch and PCIe latency, not by bandwidth.
 *
 * Why device -> device gathers run on the source device, writing to the
 * target ("push"), not on the target reading the source: the source leaves
 * may come from any allocator (another library's memory pool, whose peer
 * access we cannot grant), while the outputs always come from our own pool,
 * which cuMemPoolSetAccess opens to the source device. */
#include "base/error.h"
#include "cuda/kernels.h"
#include "run/directions.h"
#include "run/staging.h"


uint64_t mtc_packed_leaves_from(const mtc_layout *layout, int32_t source_ordinal) {
  uint64_t leaves = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device == source_ordinal) {
      leaves += layout->chunks[c].leaf_count;
    }
  }
  return leaves;
}

mtc_status mtc_gather_launch(mtc_transfer *t, mtc_device *source,
                             int32_t source_ordinal,
                             const mtc_chunk_members *members, uint64_t leaves,
                             mtc_block *const *chunk_blocks) {
  mtc_plan *plan = t->plan;
  const mtc_layout *layout = &plan->layout;
  /* The segment tables: pinned, read by the kernel, returned with the
   * plan's staging once the copy has completed. One launch per table; a
   * table takes at most the plan's largest staging buffer. */
  uint64_t per_table = plan->staging_max_bytes / sizeof(mtc_segment);
  if (per_table > UINT32_MAX) per_table = UINT32_MAX;
  mtc_segment *table = NULL;
  uint64_t n = 0, left = leaves, table_bytes = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device != source_ordinal) continue;
    for (uint64_t m = members->first[c]; m < members->first[c + 1]; m++) {
      if (table == NULL) {
        uint64_t size = left < per_table ? left : per_table;
        mtc_pinned_buffer buffer;
        mtc_status status = mtc_transfer_acquire_staging(
            t, source, (size_t)size * sizeof(mtc_segment), &buffer);
        if (status != MTC_OK) return status;
        table = buffer.ptr;
      }
      uint64_t leaf = members->leaves[m];
      table[n].src = plan->leaves[leaf].address;
      const mtc_placement *place = &layout->placements[leaf];
      table[n].dst = chunk_blocks != NULL
                         ? chunk_blocks[place->chunk]->address + place->offset
                         : plan->destinations[leaf].address;
      table[n].bytes = plan->leaves[leaf].bytes;
      left--;
      table_bytes += plan->leaves[leaf].bytes;
      if (++n == per_table || left == 0) {
        t->stats->copies_issued++;
        uint64_t begin = mtc_trace_now(t->trace);
        mtc_status status = mtc_kernels_copy_segments(source, source->stream, table, (uint32_t)n);
        if (status != MTC_OK) return status;
        mtc_trace_launch(t->trace, source, "gather", n, table_bytes, begin);
        table_bytes = 0;
        table = NULL;
        n = 0;
      }
    }
  }
  return MTC_OK;
}

/* Gathers every packed leaf of one source device with one kernel launch on
 * the source's copy stream: into pinned host blocks (target host), or into
 * device blocks of the target (pushed over peer access). Leaves *done at 0,
 * having enqueued nothing, when the path does not apply: too few leaves, no
 * kernels, or no peer access between the pair. */
mtc_status mtc_gather_source(mtc_transfer *t, int32_t source_ordinal,
                                const mtc_chunk_members *members,
                                mtc_block **chunk_blocks, int *done) {
  mtc_plan *plan = t->plan;
  const mtc_layout *layout = &plan->layout;
  *done = 0;
  uint64_t leaves = mtc_packed_leaves_from(layout, source_ordinal);
  const char *refused = NULL;
  mtc_device *source, *target = NULL;
  mtc_status status = mtc_device_get(source_ordinal, &source);
  if (status == MTC_OK && plan->target != MTC_DEVICE_CPU) {
    status = mtc_device_get(plan->target, &target);
  }
  if (status != MTC_OK) return status;
  if (leaves < MTC_GATHER_MIN_LEAVES || leaves > UINT32_MAX) {
    refused = "too few for a kernel launch";
  } else if (!mtc_kernels_available(source)) {
    /* (Loads the module on first use, in the source's own context.) */
    refused = "libmtc has no kernels here";
  } else if (target != NULL && !mtc_peer_usable(source, target)) {
    /* The outputs are the target's blocks, from libmtc's pool, which the
     * source may write only with peer access; peer copies work without. */
    refused = "no peer access from the source to the target";
  }
  char to[16] = "cpu";
  if (target != NULL) mtc_format(to, sizeof to, "cuda:%d", plan->target);
  if (refused != NULL) {
    mtc_trace_note(t->trace, "cuda:%d -> %s: %llu packed leaves, one copy "
                   "each: %s", source_ordinal, to, (unsigned long long)leaves,
                   refused);
    return MTC_OK;
  }
  *done = 1;
  mtc_trace_note(t->trace, "cuda:%d -> %s: %llu packed leaves by one gather "
                 "launch on cuda:%d", source_ordinal, to,
                 (unsigned long long)leaves, source_ordinal);

  /* The output blocks. Device blocks are allocated in stream order on the
   * target's copy stream: the source's stream waits for that. */
  CUevent allocated = NULL;
  if (target != NULL) {
    status = mtc_transfer_enter_device(t, plan->target, &target);
    if (status != MTC_OK) return status;
  }
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device != source_ordinal) continue;
    mtc_block *block;
    if (target != NULL) {
      status = mtc_block_new_device(target, layout->chunks[c].bytes, &block);
    } else {
      status = mtc_block_new_pinned(source, layout->chunks[c].bytes, MTC_PINNED_OUTPUT, &block);
    }
    if (status != MTC_OK) {
      mtc_transfer_blame_chunk(t, members, c);
      return status;
    }
    mtc_plan_keep_block(plan, block);
    if (target == NULL) mtc_transfer_count_pinned(t, &block->pinned);
    chunk_blocks[c] = block;
  }
  if (target != NULL) {
    status = mtc_transfer_record_event(t, target, &allocated);
    if (status != MTC_OK) return status;
  }

  status = mtc_transfer_enter_device(t, source_ordinal, &source);
  if (status != MTC_OK) return status;
  if (allocated != NULL) {
    status = mtc_cuda_check(t->cu->cuStreamWaitEvent(source->stream, allocated, 0),
                        "cuStreamWaitEvent");
    if (status != MTC_OK) return status;
  }
  status = mtc_transfer_order_after_source(t, source, source_ordinal);
  if (status != MTC_OK) return status;

  status = mtc_gather_launch(t, source, source_ordinal, members, leaves, chunk_blocks);
  if (status != MTC_OK) return status;
  if (target == NULL) mtc_transfer_note_path(t, MTC_PATH_GATHER_KERNEL);
  return MTC_OK;
}
