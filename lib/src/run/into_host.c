/* into_host.c — device leaves written in place into pinned host
 * destinations (see into_host.h). */
#include "run/into_host.h"

#include "cuda/kernels.h"

uint64_t mtc_into_direct_settle(mtc_plan *plan, const mtc_chunk_members *members) {
  if (plan->direct_dst == NULL) return 0;
  const mtc_layout *layout = &plan->layout;
  uint64_t direct = 0;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    int32_t source = layout->chunks[c].source_device;
    if (source == MTC_DEVICE_CPU) continue;
    /* One destination of this source that is not pinned: none of its
     * packed leaves is written in place (its gather writes them all). */
    int all = 1;
    for (size_t d = 0; d < layout->chunk_count && all; d++) {
      if (layout->chunks[d].source_device != source) continue;
      for (uint64_t k = members->first[d]; k < members->first[d + 1] && all; k++) {
        all = plan->direct_dst[members->leaves[k]];
      }
    }
    if (all) continue;
    for (uint64_t k = members->first[c]; k < members->first[c + 1]; k++) {
      plan->direct_dst[members->leaves[k]] = 0;
    }
  }
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    mtc_placement_kind kind = layout->placements[i].kind;
    if (kind != MTC_PLACE_PACKED && kind != MTC_PLACE_OWN) plan->direct_dst[i] = 0;
    direct += plan->direct_dst[i];
  }
  return direct;
}

mtc_status mtc_into_direct_gather(mtc_transfer *t, int32_t source_ordinal,
                                  const mtc_chunk_members *members, int *done) {
  mtc_plan *plan = t->plan;
  *done = 0;
  uint64_t leaves = mtc_packed_leaves_from(&plan->layout, source_ordinal);
  mtc_device *source;
  mtc_status status = mtc_device_get(source_ordinal, &source);
  if (status != MTC_OK) return status;
  if (leaves < MTC_GATHER_MIN_LEAVES || leaves > UINT32_MAX ||
      !mtc_kernels_available(source)) {
    return MTC_OK;
  }
  *done = 1;
  status = mtc_transfer_enter_device(t, source_ordinal, &source);
  if (status == MTC_OK) status = mtc_transfer_order_after_source(t, source, source_ordinal);
  if (status == MTC_OK) status = mtc_transfer_order_after_pinned(t, source);
  if (status != MTC_OK) return status;
  mtc_trace_note(t->trace, "cuda:%d -> cpu: %llu packed leaves by one gather "
                 "launch into their pinned destinations", source_ordinal,
                 (unsigned long long)leaves);
  mtc_transfer_note_path(t, MTC_PATH_GATHER_KERNEL);
  return mtc_gather_launch(t, source, source_ordinal, members, leaves, NULL);
}

mtc_status mtc_into_direct_leaf(mtc_transfer *t, uint64_t i) {
  mtc_plan *plan = t->plan;
  const mtc_leaf *leaf = &plan->leaves[i];
  mtc_device *source;
  mtc_status status = mtc_transfer_enter_device(t, leaf->device, &source);
  if (status == MTC_OK) status = mtc_transfer_order_after_source(t, source, leaf->device);
  if (status == MTC_OK) status = mtc_transfer_order_after_pinned(t, source);
  if (status != MTC_OK) return status;
  mtc_transfer_note_path(t, MTC_PATH_PER_LEAF);
  t->stats->copies_issued++;
  return mtc_cuda_check(
      t->cu->cuMemcpyDtoHAsync_v2((void *)(uintptr_t)plan->destinations[i].address,
                                  (CUdeviceptr)leaf->address, (size_t)leaf->bytes,
                                  source->stream),
      "cuMemcpyDtoHAsync");
}
