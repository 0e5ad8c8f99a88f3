/* transfer_context.h — the state of one submission while it runs (which
 * devices got work, the source waits already queued, the ring of pinned
 * piece buffers), and the helpers every direction of copy uses: entering a
 * device, ordering after the caller's streams, recording what the plan
 * keeps, staging host leaves under the read guard. */
#ifndef MTC_RUN_TRANSFER_CONTEXT_H
#define MTC_RUN_TRANSFER_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/driver.h"
#include "run/plan_state.h"
#include "run/trace.h"
#include "stage/stage_copy.h"

/* A pinned buffer that own host->device leaves are streamed through. */
typedef struct mtc_piece_slot {
  mtc_pinned_buffer buffer;
  CUevent event;
  int recorded; /* event follows every DMA that read this buffer */
} mtc_piece_slot;

/* Pieces in one piece buffer start at multiples of this. */
#define MTC_PIECE_ALIGNMENT 256

/* A copy stream that already waits on the event recorded on the caller's
 * stream of a source device. */
typedef struct mtc_source_wait {
  mtc_device *stream_owner;
  int32_t source;
} mtc_source_wait;

typedef struct mtc_transfer {
  mtc_plan *plan;
  const mtc_cuda_api *cu; /* NULL until a device is involved */
  mtc_context_scope scope;
  mtc_plan_stats *stats;
  /* Devices whose copy stream got work: joined into one completion. */
  mtc_device **used;
  size_t used_count, used_capacity;
  mtc_source_wait *waits;
  size_t wait_count, wait_capacity;
  /* Pinned buffers that own host->device leaves are streamed through, in
   * pieces of at most piece_bytes. Small leaves share a buffer (one piece
   * each); a buffer is refilled only after the DMAs that read it. */
  mtc_piece_slot pieces[MTC_PIECE_RING];
  size_t piece_bytes;
  size_t slot;      /* the buffer being filled */
  size_t slot_fill; /* bytes of it handed out */
  int slot_ready;   /* pieces[slot] may take pieces */
  int64_t failed_leaf; /* the leaf a failure is about, or -1 */
  /* Devices (bit per ordinal) whose copy stream already waits for the
   * earlier copies that used the plan's pinned blocks. */
  uint64_t pinned_ordered;
  mtc_trace *trace;    /* MTC_TRACE's timeline, or NULL */
} mtc_transfer;

/* Leaf indices of each packed chunk, in leaf order: leaves[first[c] ...
 * first[c + 1]). */
typedef struct mtc_chunk_members {
  uint64_t *first; /* chunk_count + 1 entries */
  uint64_t *leaves;
} mtc_chunk_members;

static inline mtc_status mtc_cuda_check(CUresult r, const char *what) {
  return r == CUDA_SUCCESS ? MTC_OK : mtc_cuda_fail(r, what);
}

/* MTC_ERR_OUT_OF_MEMORY, "out of host memory". */
mtc_status mtc_out_of_host_memory(void);

/* Makes room for `needed` items of `size` bytes in *items (a pointer to
 * the array pointer). 0, or -1 when out of memory. */
int mtc_grow_array(void *items, size_t *capacity, size_t needed, size_t size);

/* Makes ordinal's context current and notes that its stream gets work. */
mtc_status mtc_transfer_enter_device(mtc_transfer *t, int32_t ordinal,
                                     mtc_device **out);

/* Before device's copy stream reads or writes the plan's pinned blocks in
 * place (or records the completion that a copy-out into them follows): it
 * waits for the earlier copies that used them, once per device. */
mtc_status mtc_transfer_order_after_pinned(mtc_transfer *t, mtc_device *device);

/* Before copies on stream_owner's copy stream (its context current) read
 * leaves of `source`: when the caller set a stream on that device, the copy
 * stream waits on the event submit recorded there. Once per pair. */
mtc_status mtc_transfer_order_after_source(mtc_transfer *t,
                                           mtc_device *stream_owner,
                                           int32_t source);

/* The plan keeps event (of device) until it is released. On failure the
 * event goes back at once. */
mtc_status mtc_transfer_hold_event(mtc_transfer *t, mtc_device *device,
                                   CUevent event);

/* A new event of device (its context current), recorded on its copy
 * stream and held by the plan. */
mtc_status mtc_transfer_record_event(mtc_transfer *t, mtc_device *device,
                                     CUevent *out);

/* Counts a pinned buffer as a pool reuse or a new allocation. */
void mtc_transfer_count_pinned(mtc_transfer *t, const mtc_pinned_buffer *buffer);

/* Notes which device-to-host path ran (the slowest one wins). */
void mtc_transfer_note_path(mtc_transfer *t, uint32_t path);

/* mtc_stage_copy, timed; a read of the leaves' host memory, so it fails
 * once mtc_plan_stop_reading has run. */
mtc_status mtc_transfer_stage(mtc_transfer *t, const mtc_stage_segment *segments,
                              size_t count);

/* Copies a packed chunk's host leaves (members, count of them) into dst at
 * their offsets. */
mtc_status mtc_transfer_stage_chunk(mtc_transfer *t, const uint64_t *members,
                                    uint64_t count, unsigned char *dst);

/* What the plan keeps until release (room reserved at submit). */
void mtc_plan_keep_block(mtc_plan *plan, mtc_block *block);
void mtc_plan_keep_pinned(mtc_plan *plan, const mtc_pinned_buffer *buffer);
void mtc_plan_keep_host(mtc_plan *plan, void *host);

/* Where leaf `index` goes in its output block: its offset in the chunk when
 * packed, else 0. */
static inline uint64_t mtc_plan_block_offset(const mtc_plan *plan, uint64_t index) {
  const mtc_placement *place = &plan->layout.placements[index];
  return place->kind == MTC_PLACE_PACKED ? place->offset : 0;
}

/* The whole of a leaf's dense image (leaf is one of plan's), to be written
 * to dst. */
mtc_stage_segment mtc_leaf_segment(const mtc_plan *plan, const mtc_leaf *leaf,
                                   unsigned char *dst);

/* Whether accessor may reach owner's memory, setting that up on first use.
 * A failure only costs speed (the caller falls back to copies that work
 * either way), so it is no error of the plan's: the thread's last error is
 * left as it was. */
int mtc_peer_usable(mtc_device *accessor, mtc_device *owner);

/* Peer copies run on the target's copy stream: enters the target, lets it
 * read the source's memory directly where the pair allows (else the driver
 * stages the copies through the host: slower, still correct), and orders
 * the copies after the caller's stream on the source. */
mtc_status mtc_transfer_enter_peer_copy(mtc_transfer *t, mtc_device *source,
                                        mtc_device **out_target);

/* Groups the packed leaves by chunk. On failure (out of memory) the caller
 * still frees out->first and out->leaves. */
mtc_status mtc_chunk_members_group(const mtc_plan *plan,
                                   mtc_chunk_members *out);
/* The same for a layout of leaf_count leaves (a prepared copy's). */
mtc_status mtc_chunk_members_of(const mtc_layout *layout, uint64_t leaf_count,
                                mtc_chunk_members *out);

/* Names chunk c's first leaf as the one a failure is about; the message
 * says it was not alone. */
void mtc_transfer_blame_chunk(mtc_transfer *t, const mtc_chunk_members *members,
                              size_t c);

#endif
