/* plan_state.h — the inside of mtc_plan: the data that plan/ (its life
 * cycle: create, submit, wait, release) and run/ (carrying the copy out)
 * share. Who may touch which field when is written beside each group. */
#ifndef MTC_RUN_PLAN_STATE_H
#define MTC_RUN_PLAN_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "run/background.h"
#include "memory/block.h"
#include "cuda/device.h"
#include "base/error.h"
#include "cuda/event.h"
#include "mtc.h"
#include "memory/pinned_pool.h"
#include "layout/planner.h"
#include "stage/strided.h"
#include "stage/stage_copy.h"

typedef enum mtc_plan_phase {
  MTC_PHASE_BUILDING = 0,   /* accepting leaves */
  MTC_PHASE_SUBMITTING = 1, /* queued or staging/enqueueing copies */
  MTC_PHASE_IN_FLIGHT = 2,  /* all enqueued; events pending */
  MTC_PHASE_DONE = 3,
  MTC_PHASE_FAILED = 4
} mtc_plan_phase;

/* Memory that copies read from until they complete. */
typedef struct mtc_plan_staging {
  mtc_pinned_buffer pinned; /* pinned.ptr != NULL: a pinned pool buffer */
  void *host;               /* else: malloc'd */
} mtc_plan_staging;

typedef struct mtc_plan_event {
  mtc_device *device;
  CUevent event;
} mtc_plan_event;

/* A stream of the caller's, named with mtc_plan_set_stream. */
typedef struct mtc_plan_stream {
  mtc_device *device;
  CUstream stream;
  /* Recorded on stream by submit (on the caller's thread) when the plan
   * copies leaves that live on device: the copies that read them wait on
   * it. NULL otherwise. */
  CUevent ready;
} mtc_plan_stream;

struct mtc_plan {
  int32_t target;
  mtc_options options;

  mtc_leaf *leaves;
  uint64_t leaf_count, leaf_capacity;
  /* The layouts of strided leaves (mtc_plan_set_leaf_layout): entry i for
   * leaf i < strided_count, NULL for contiguous ones; NULL until the first
   * layout. Set before submit; read-only afterwards. */
  mtc_strided **strided;
  uint64_t strided_count;

  /* mtc_plan_add_leaves_into: leaf i is copied into destinations[i]
   * (capacity as leaves; NULL for a plan of plain leaves). `into` is 1 once
   * such leaves were added, -1 once plain ones were, 0 before either. Set
   * before submit; read-only afterwards. */
  mtc_leaf *destinations;
  int into;
  /* mtc_plan_set_destination_blocks: entry i is the device block of
   * libmtc's that holds destinations[i] (one reference each, the plan's),
   * or NULL when that destination is memory of unknown origin; entries from
   * destination_block_capacity on are NULL too (the array is NULL until
   * the first call). Set before submit; read-only
   * afterwards. Between two GPUs, run/into.c gathers a source device's
   * packed leaves with one kernel only into such blocks. */
  mtc_block **destination_blocks;
  uint64_t destination_block_capacity;
  /* An into plan to the host: what is copied into the destinations by the
   * caller's poll or wait once the copy has completed (run/into.c): device
   * leaves out of the pinned blocks they landed in, host leaves from their
   * own memory. copy_out_leaves[k] is segment k's leaf. Written by the
   * submission; read under the lock. */
  mtc_stage_segment *copy_out;
  uint64_t *copy_out_leaves;
  size_t copy_out_count;
  /* Leaves whose destination a later copy writes (mtc_plan_skip_copy_out):
   * 1 each, or NULL before the first. Under the lock. */
  unsigned char *copy_out_skip;

  /* Set before submit; read-only afterwards. One entry per device. */
  mtc_plan_stream *streams;
  size_t stream_count;

  /* Pinned blocks of the library's that the copy reads or writes
   * (MTC_LEAF_PINNED leaves and destinations found at submit, whatever
   * their layout or direction): one reference and one mtc_block_use_begin
   * each, until the submission ends (use_end with the completion event) and
   * the plan is released (the reference). pinned_how[k] says how the copy
   * uses pinned[k] (MTC_PINNED_* bits). */
  mtc_block **pinned;
  unsigned char *pinned_how;
  size_t pinned_count;
  int pinned_uses_open; /* 1 from submit until use_end was called */
  /* 1 from the end of the submission until the copy-out ran or the plan
   * was released, when a block has MTC_PINNED_COPY_OUT (copy_out_begin
   * was called for it). Under the lock once the submission is over. */
  int pinned_copy_outs_open;
  /* An into plan to the host: 1 for leaf i whose destination lies in one of
   * those blocks and that the GPU writes in place (run/into_host.c; no
   * copy-out); NULL when there is none. Set at submit, settled by the
   * submission. */
  unsigned char *direct_dst;

  /* A plan made from a prepared copy (plan/prepared.c) comes with what its
   * template worked out once; all 0 for other plans. Set before submit. */
  struct {
    /* `layout` is set already, made with packed chunks of at most
     * chunk_limit bytes, and `counts` is what it says: submit keeps both
     * unless a pinned lookup finds leaves to read in place or the pinned
     * pool's limit changed the cut. Such a plan takes no more leaves or
     * layouts. */
    int laid_out;
    uint64_t chunk_limit;
    mtc_layout_counts counts;
    int devices_checked; /* every CUDA leaf's device exists */
    int apart;    /* no destination overlaps (checked at these addresses) */
    int unpinned; /* no leaf or destination has MTC_LEAF_PINNED */
    /* A copy into device memory with the template's destinations: the
     * scatter tables of its host chunks, on the target, written once
     * (plan/prepared_tables.c); entry m is for packed member m. Used while
     * `laid_out` holds; a reference of the plan's own. NULL otherwise. */
    mtc_block *scatter_tables;
  } prepared;

  /* Set at submit (or by a prepared copy); read-only afterwards. */
  mtc_layout layout;
  mtc_leaf_result *results;
  uint64_t submit_start_ns; /* clock when submit was called */

  /* Written by the submission (run/transfer.c) before the phase leaves
   * SUBMITTING; capacities are reserved at submit so that recording an
   * acquired resource never fails. */
  mtc_block **blocks; /* the plan's one reference per block */
  size_t block_count;
  mtc_plan_staging *staging;
  size_t staging_count;
  /* One event after all of the copy's device work (the other devices'
   * copy streams joined into one), or NULL when there was none. The plan
   * holds one reference. */
  mtc_event *completion;
  mtc_plan_event *held_events; /* pipeline and join events, returned at release */
  size_t held_count, held_capacity;

  pthread_mutex_t lock;
  pthread_cond_t submitted; /* broadcast when the phase leaves SUBMITTING */
  /* Threads in a wait on the plan that lets go of the lock meanwhile
   * (plan/wait.c): a wait may run on another thread (an FFI call on a
   * runtime's pool) while the plan is released, so release waits, after its
   * own wait, until none is left. Under the lock; `waiters_left` is
   * broadcast when it drops to 0. */
  int waiters;
  pthread_cond_t waiters_left;
  mtc_plan_phase phase;
  /* Set with the phase leaving SUBMITTING: what a waiter spins on without
   * the lock (spinning on the lock would slow the thread that sets it). */
  atomic_int submission_over;
  /* Set by mtc_plan_stop_reading: no read of the leaves' host memory may
   * begin; `reading` is set while one runs (both sequentially consistent:
   * either the reader sees the stop, or the stopper sees the read). */
  atomic_int stop_reading;
  atomic_int reading;
  mtc_status status;
  int64_t error_leaf;
  char error[MTC_ERROR_CAPACITY];
  mtc_plan_stats stats; /* guarded by lock; see mtc_plan_get_stats */

  mtc_background_item background;

  /* Largest pinned staging buffer the submission takes: fixed at submit
   * from the pinned pool's limit (chunks, pieces and gather tables fit). */
  size_t staging_max_bytes;

  /* Every live plan, for the exit handler (plan/exit.c); guarded by its
   * lock there. */
  struct mtc_plan *live_prev, *live_next;
  /* The plans in flight that hold pinned staging, oldest first
   * (run/in_flight.c); guarded by its lock there. */
  struct mtc_plan *flight_prev, *flight_next;
  int flight_listed;
  /* Threads settling this plan through that list (they took it there);
   * release waits for 0 after taking it off the list. */
  atomic_int flight_pins;
};

/* How a copy uses one of its pinned blocks (mtc_plan.pinned_how). */
enum {
  /* The host reads or writes it during the submission (a strided or
   * pitched leaf staged, a host copy, a copyInto's source staged), or at
   * the copy-out (host -> host leaves): the submission first waits for the
   * copies before it that use the block. Else the GPU reads or writes it
   * in place, ordered after them on its stream. */
  MTC_PINNED_HOST = 1,
  /* The caller's poll or wait reads or writes it after the device work
   * (the copy-out of a copy into host destinations): busy until then. Set
   * when the submission ends. */
  MTC_PINNED_COPY_OUT = 2
};

/* Most pinned piece buffers one plan streams large leaves through. */
#define MTC_PIECE_RING 3

/* The layout of leaf `index` (mtc_plan_set_leaf_layout), or NULL when it is
 * contiguous. */
static inline const mtc_strided *mtc_plan_leaf_strided(const mtc_plan *plan,
                                                       uint64_t index) {
  return index < plan->strided_count ? plan->strided[index] : NULL;
}

/* The caller's stream on the plan's target device, or NULL. */
CUstream mtc_plan_target_stream(const mtc_plan *plan);

/* Records the thread's last error as the plan's error too, with the leaf it
 * is about (-1: none); lock held (the background thread may record the
 * copy's own failure at the same time). */
void mtc_plan_record_error_locked(mtc_plan *plan, int64_t leaf);

/* Ends the plan's uses of the pinned blocks it reads or writes in place:
 * they are busy until `completion` (NULL: no work of the plan's is left).
 * Once; later calls do nothing. */
void mtc_plan_end_pinned_uses(mtc_plan *plan, mtc_event *completion);

/* Ends the busy marks of the blocks the copy-out reads or writes
 * (MTC_PINNED_COPY_OUT): it ran, or never will. Once; later calls do
 * nothing. The plan's lock held, or the plan being released. */
void mtc_plan_end_copy_outs(mtc_plan *plan);

/* Brackets every read of the leaves' host memory. MTC_OK: go ahead, then
 * mtc_plan_read_end. After mtc_plan_stop_reading: MTC_ERR_INVALID_STATE,
 * the last error set. */
mtc_status mtc_plan_read_begin(mtc_plan *plan);
void mtc_plan_read_end(mtc_plan *plan);

/* Closes the guard for good (mtc_plan_stop_reading, and the exit handler
 * of plan/exit.c): no read may begin any more, and a read in progress is
 * waited for, up to timeout_ms (then MTC_IN_PROGRESS, the last error set). */
mtc_status mtc_plan_read_stop(mtc_plan *plan, uint32_t timeout_ms);

#endif
