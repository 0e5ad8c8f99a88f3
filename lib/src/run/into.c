/* into.c — copies into memory that already exists
 * (mtc_plan_add_leaves_into): leaf i goes to plan->destinations[i], and
 * no output block is made for it. By direction:
 *
 *   host -> device    packed leaves staged into one pinned buffer, one DMA
 *                     into a scratch block of the target, one scatter
 *                     kernel that places them (into_scatter.c); own leaves
 *                     streamed through pinned pieces straight into their
 *                     destination
 *   device -> device  a source device's packed leaves by one gather launch
 *                     on that device whose table points at the
 *                     destinations: on one device always, between two only
 *                     into blocks of libmtc's over peer access (see
 *                     gather_refused); own leaves, the rest and all without
 *                     kernels one copy each (peer copies between devices)
 *   device -> host    as for new outputs (gather kernel into pinned
 *                     blocks), then copied out into the destinations by
 *                     the caller's poll or wait that finds the copy
 *                     complete (copy_out.c); pinned destinations of ours
 *                     are written in place instead (into_host.c)
 *   host -> host      copied into the destinations by that poll or wait
 *
 * Every copy that writes device destinations runs after the work queued on
 * the caller's stream of the target before submit (submit.c records that
 * event for plans of this kind). */
#include "run/into.h"

#include <stdlib.h>

#include "base/error.h"
#include "cuda/kernels.h"
#include "run/directions.h"
#include "run/into_host.h"
#include "run/into_scatter.h"
#include "run/staging.h"

/* One device leaf into its destination on the target, on the target's
 * stream: a copy within the device, or a peer copy. */
static mtc_status peer_leaf(mtc_transfer *t, uint64_t index) {
  mtc_plan *plan = t->plan;
  const mtc_leaf *leaf = &plan->leaves[index];
  mtc_device *source, *target;
  mtc_status status = mtc_device_get(leaf->device, &source);
  if (status != MTC_OK) return status;
  status = mtc_transfer_enter_peer_copy(t, source, &target);
  if (status != MTC_OK) return status;
  status = mtc_transfer_order_after_source(t, target, plan->target);
  if (status != MTC_OK) return status;
  t->stats->copies_issued++;
  CUdeviceptr dst = (CUdeviceptr)mtc_into_destination(plan, index);
  if (source == target) {
    return mtc_cuda_check(t->cu->cuMemcpyDtoDAsync_v2(dst, (CUdeviceptr)leaf->address,
                                                      (size_t)leaf->bytes,
                                                      target->stream),
                          "cuMemcpyDtoDAsync");
  }
  return mtc_cuda_check(t->cu->cuMemcpyPeerAsync(dst, target->context,
                                                 (CUdeviceptr)leaf->address,
                                                 source->context,
                                                 (size_t)leaf->bytes, target->stream),
                        "cuMemcpyPeerAsync");
}

/* The first packed leaf of source_ordinal whose destination is not known
 * to lie in a device block of libmtc's (mtc_plan_set_destination_blocks),
 * or -1 when every one does. */
static int64_t first_foreign(const mtc_plan *plan, int32_t source_ordinal,
                             const mtc_chunk_members *members) {
  const mtc_layout *layout = &plan->layout;
  for (size_t c = 0; c < layout->chunk_count; c++) {
    if (layout->chunks[c].source_device != source_ordinal) continue;
    for (uint64_t m = members->first[c]; m < members->first[c + 1]; m++) {
      uint64_t leaf = members->leaves[m];
      if (leaf >= plan->destination_block_capacity ||
          plan->destination_blocks[leaf] == NULL) {
        return (int64_t)leaf;
      }
    }
  }
  return -1;
}

/* Why the packed leaves of `source` cannot go by one gather launch into
 * their destinations on the target, or NULL when they can. Between two
 * devices the kernel runs on the source and writes the target's memory,
 * so every destination must be a block of libmtc's (its pool is opened to
 * the source device; another allocator's memory may be out of the
 * kernel's reach, and a stray write is fatal to the context, where a peer
 * copy always works) and the pair must have peer access. */
static const char *gather_refused(mtc_transfer *t, mtc_device *source,
                                  mtc_device *target, uint64_t leaves,
                                  const mtc_chunk_members *members,
                                  char *why, size_t why_size) {
  if (leaves < MTC_INTO_KERNEL_MIN_LEAVES || leaves > UINT32_MAX) {
    return "too few for a kernel launch";
  }
  if (!mtc_kernels_available(source)) return "libmtc has no kernels here";
  if (source == target) return NULL;
  int64_t foreign = first_foreign(t->plan, source->ordinal, members);
  if (foreign >= 0) {
    mtc_format(why, why_size,
               "leaf %lld's destination is not known to be a block of "
               "libmtc's (mtc_plan_set_destination_blocks)",
               (long long)foreign);
    return why;
  }
  if (!mtc_peer_usable(source, target)) {
    mtc_format(why, why_size, "cuda:%d has no peer access to cuda:%d",
               source->ordinal, target->ordinal);
    return why;
  }
  return NULL;
}

/* Every packed leaf of source_ordinal into its destination with one gather
 * launch on the source's stream (between two devices, pushed into the
 * target's blocks over peer access). *done stays 0, with nothing enqueued,
 * when that path does not apply (gather_refused); the leaves then take one
 * copy each. */
static mtc_status gather_into(mtc_transfer *t, int32_t source_ordinal,
                              const mtc_chunk_members *members, int *done) {
  mtc_plan *plan = t->plan;
  *done = 0;
  uint64_t leaves = mtc_packed_leaves_from(&plan->layout, source_ordinal);
  mtc_device *source, *target;
  mtc_status status = mtc_device_get(source_ordinal, &source);
  if (status == MTC_OK) status = mtc_device_get(plan->target, &target);
  if (status != MTC_OK) return status;
  char why[160];
  const char *refused = gather_refused(t, source, target, leaves, members,
                                       why, sizeof why);
  if (refused != NULL) {
    mtc_trace_note(t->trace, "cuda:%d -> cuda:%d: %llu packed leaves, one "
                   "copy each: %s", source_ordinal, plan->target,
                   (unsigned long long)leaves, refused);
    return MTC_OK;
  }
  *done = 1;
  CUevent before = NULL;
  if (source != target) {
    /* Writes into the target's memory happen on its copy stream, in
     * submission order: this launch, on the source's stream, comes after
     * what is queued there (the plans before, and with order_after_source
     * the caller's work on the target). */
    status = mtc_transfer_enter_device(t, plan->target, &target);
    if (status == MTC_OK) status = mtc_transfer_order_after_source(t, target, plan->target);
    if (status == MTC_OK) status = mtc_transfer_record_event(t, target, &before);
    if (status != MTC_OK) return status;
  }
  /* The launch waits for the caller's stream on the source (its reads)
   * and, on one device, on the target (its writes) too. */
  status = mtc_transfer_enter_device(t, source_ordinal, &source);
  if (status == MTC_OK && before != NULL) {
    status = mtc_cuda_check(t->cu->cuStreamWaitEvent(source->stream, before, 0),
                            "cuStreamWaitEvent");
  }
  if (status == MTC_OK) status = mtc_transfer_order_after_source(t, source, source_ordinal);
  if (status != MTC_OK) return status;
  mtc_trace_note(t->trace, "cuda:%d -> cuda:%d: %llu packed leaves by one "
                 "gather launch on cuda:%d", source_ordinal, plan->target,
                 (unsigned long long)leaves, source_ordinal);
  return mtc_gather_launch(t, source, source_ordinal, members, leaves, NULL);
}

/* Every leaf bound for a host destination: what the caller's poll or wait
 * copies into it once the copy has completed (copy_out.c). Device leaves
 * come out of the pinned blocks they landed in; host leaves are read from
 * their own memory then, so no host destination is written on a library
 * thread, at a moment the caller cannot know. */
static mtc_status plan_copy_out(mtc_transfer *t, mtc_block **chunk_blocks,
                                mtc_block **own_blocks) {
  mtc_plan *plan = t->plan;
  size_t n = 0;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    if (plan->leaves[i].bytes > 0 && !mtc_into_direct(plan, i)) n++;
  }
  if (n == 0) return MTC_OK;
  plan->copy_out = malloc(n * sizeof *plan->copy_out);
  plan->copy_out_leaves = malloc(n * sizeof *plan->copy_out_leaves);
  if (plan->copy_out == NULL || plan->copy_out_leaves == NULL) {
    return mtc_out_of_host_memory();
  }
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    const mtc_leaf *leaf = &plan->leaves[i];
    if (leaf->bytes == 0 || mtc_into_direct(plan, i)) continue; /* written in place */
    unsigned char *dst = (unsigned char *)(uintptr_t)mtc_into_destination(plan, i);
    mtc_stage_segment *seg = &plan->copy_out[plan->copy_out_count];
    plan->copy_out_leaves[plan->copy_out_count++] = i;
    if (leaf->device == MTC_DEVICE_CPU) {
      *seg = mtc_leaf_segment(plan, leaf, dst);
      continue;
    }
    const mtc_placement *place = &plan->layout.placements[i];
    uint64_t landed = place->kind == MTC_PLACE_PACKED
                          ? chunk_blocks[place->chunk]->address + place->offset
                          : own_blocks[i]->address;
    *seg = (mtc_stage_segment){0}; /* contiguous: no rows, no layout */
    seg->dst = dst;
    seg->src = (const unsigned char *)(uintptr_t)landed;
    seg->begin = 0;
    seg->end = leaf->bytes;
  }
  return MTC_OK;
}

/* One own leaf, by its direction. */
static mtc_status copy_own_leaf(mtc_transfer *t, uint64_t i, mtc_block **own_blocks) {
  mtc_plan *plan = t->plan;
  const mtc_leaf *leaf = &plan->leaves[i];
  if (plan->target == MTC_DEVICE_CPU) {
    if (leaf->device == MTC_DEVICE_CPU) return MTC_OK; /* plan_copy_out */
    if (mtc_into_direct(plan, i)) return mtc_into_direct_leaf(t, i);
    return mtc_to_host_own_leaf(t, i, &own_blocks[i]);
  }
  if (leaf->device != MTC_DEVICE_CPU) return peer_leaf(t, i);
  mtc_device *target;
  mtc_status status = mtc_into_enter_target(t, &target);
  if (status != MTC_OK) return status;
  return mtc_to_device_leaf_at(t, target, leaf, (CUdeviceptr)mtc_into_destination(plan, i));
}

/* One packed chunk not gathered, by its direction. */
static mtc_status copy_chunk(mtc_transfer *t, size_t c, const mtc_chunk_members *all,
                             mtc_block **chunk_blocks) {
  mtc_plan *plan = t->plan;
  uint64_t first = all->first[c];
  const uint64_t *members = &all->leaves[first];
  uint64_t count = all->first[c + 1] - first;
  int32_t source = plan->layout.chunks[c].source_device;
  if (source == MTC_DEVICE_CPU) {
    if (plan->target == MTC_DEVICE_CPU) return MTC_OK; /* plan_copy_out */
    return mtc_into_scatter_chunk(t, c, all, first);
  }
  int direct = plan->target == MTC_DEVICE_CPU && mtc_into_direct(plan, members[0]);
  if (plan->target == MTC_DEVICE_CPU && !direct) {
    return mtc_to_host_chunk(t, c, members, count, &chunk_blocks[c]);
  }
  for (uint64_t k = 0; k < count; k++) {
    mtc_status status = direct ? mtc_into_direct_leaf(t, members[k]) : peer_leaf(t, members[k]);
    if (status != MTC_OK) {
      t->failed_leaf = (int64_t)members[k];
      return status;
    }
  }
  return MTC_OK;
}

mtc_status mtc_into_run(mtc_transfer *t, const mtc_chunk_members *members,
                        mtc_block **chunk_blocks, mtc_block **own_blocks) {
  mtc_plan *plan = t->plan;
  const mtc_layout *layout = &plan->layout;
  t->stats->leaves_direct = mtc_into_direct_settle(plan, members);
  /* Per chunk: 0 to copy on its own, 1 gathered, 2 its source declined. */
  unsigned char *gathered = calloc(layout->chunk_count + 1, 1);
  if (gathered == NULL) return mtc_out_of_host_memory();
  mtc_status status = MTC_OK;
  /* Gathers first: the GPU gathers while the host stages the rest. */
  for (size_t c = 0; status == MTC_OK && c < layout->chunk_count; c++) {
    int32_t source = layout->chunks[c].source_device;
    if (source == MTC_DEVICE_CPU || gathered[c] != 0) continue;
    int done = 0;
    if (plan->target != MTC_DEVICE_CPU) {
      status = gather_into(t, source, members, &done);
    } else if (mtc_into_direct(plan, members->leaves[members->first[c]])) {
      status = mtc_into_direct_gather(t, source, members, &done);
    } else {
      status = mtc_gather_source(t, source, members, chunk_blocks, &done);
    }
    for (size_t d = c; d < layout->chunk_count; d++) {
      if (layout->chunks[d].source_device == source) gathered[d] = done ? 1 : 2;
    }
  }
  for (uint64_t i = 0; status == MTC_OK && i < plan->leaf_count; i++) {
    if (layout->placements[i].kind != MTC_PLACE_OWN) continue;
    status = copy_own_leaf(t, i, own_blocks);
    if (status != MTC_OK) t->failed_leaf = (int64_t)i;
  }
  for (size_t c = 0; status == MTC_OK && c < layout->chunk_count; c++) {
    if (gathered[c] == 1) continue;
    status = copy_chunk(t, c, members, chunk_blocks);
    if (status != MTC_OK && t->failed_leaf < 0) mtc_transfer_blame_chunk(t, members, c);
  }
  free(gathered);
  if (status == MTC_OK && plan->target == MTC_DEVICE_CPU) {
    status = plan_copy_out(t, chunk_blocks, own_blocks);
  }
  return status;
}

void mtc_into_fill_results(mtc_plan *plan) {
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    mtc_leaf_result *r = &plan->results[i];
    r->address = mtc_into_destination(plan, i);
    r->block = NULL;
    r->offset = 0;
    r->device = plan->target;
    r->flags = MTC_RESULT_INTO | (mtc_into_direct(plan, i) ? MTC_RESULT_DIRECT : 0u);
  }
}
