/* plan.h — the inside of mtc_plan, shared by plan.c (life cycle, state and
 * validation) and transfer.c (staging and enqueueing the copies). */
#ifndef MTC_PLAN_H
#define MTC_PLAN_H

#include <pthread.h>
#include <stdint.h>

#include "background.h"
#include "block.h"
#include "device.h"
#include "error.h"
#include "mtc.h"
#include "pinned_pool.h"
#include "planner.h"

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
  int complete; /* poll saw it done */
} mtc_plan_event;

struct mtc_plan {
  int32_t target;
  mtc_options options;

  mtc_leaf *leaves;
  uint64_t leaf_count, leaf_capacity;

  /* Set at submit; read-only afterwards. */
  mtc_layout layout;
  mtc_leaf_result *results;

  /* Written by the submission (transfer.c) before the phase leaves
   * SUBMITTING; capacities are reserved at submit so that recording an
   * acquired resource never fails. */
  mtc_block **blocks; /* the plan's one reference per block */
  size_t block_count;
  mtc_plan_staging *staging;
  size_t staging_count;
  mtc_plan_event *events; /* one completion event per stream used */
  size_t event_count;
  mtc_plan_event *held_events; /* pipeline events, returned at release */
  size_t held_count;

  pthread_mutex_t lock;
  pthread_cond_t submitted; /* broadcast when the phase leaves SUBMITTING */
  mtc_plan_phase phase;
  mtc_status status;
  int64_t error_leaf;
  char error[MTC_ERROR_CAPACITY];

  mtc_background_item background;
};

/* Most pinned piece buffers one plan streams large leaves through. */
#define MTC_PIECE_RING 3

/* Plans created and not yet released (for mtc_get_stats). */
uint64_t mtc_plan_live_count(void);

#endif
