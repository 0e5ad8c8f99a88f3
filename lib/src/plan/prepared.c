/* prepared.c — prepared copies: a plan's structure copied, checked and
 * laid out once (mtc_prepared_create); then, for each batch of that
 * structure, a plan made with only its addresses checked and the layout
 * copied in (mtc_prepared_plan), and submitted (mtc_prepared_submit).
 * A plan made here owns copies of everything it uses: it never reads the
 * prepared copy again, so the prepared copy may be released while its
 * plans are in flight. */
#include <stdlib.h>
#include <string.h>

#include "memory/pinned_pool.h"
#include "plan/phase.h"
#include "plan/prepared_tables.h"
#include "plan/submit.h"
#include "plan/validate.h"

struct mtc_prepared {
  int32_t target;
  mtc_options options;
  uint64_t leaf_count;
  mtc_leaf *leaves;       /* as the plan holds them: strided ones marked */
  uint64_t *extents;      /* the bytes each leaf's source spans */
  mtc_leaf *destinations; /* NULL for a plan of plain leaves */
  mtc_strided **strided;  /* as mtc_plan.strided */
  uint64_t strided_count;
  mtc_layout layout;
  uint64_t chunk_limit; /* the cut the layout was made with */
  mtc_layout_counts counts;
  int unpinned; /* no leaf or destination has MTC_LEAF_PINNED */
  /* Into device memory: the host chunks' scatter tables on the target
   * (prepared_tables.c), for plans with these destinations; or NULL. */
  mtc_block *scatter_tables;
};

static mtc_status out_of_memory(const char *call) {
  return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
}

/* Copies of the layouts of strided leaves (NULL entries for the rest);
 * NULL when out of memory. */
static mtc_strided **copy_strided(mtc_strided *const *from, uint64_t count) {
  mtc_strided **copy = calloc((size_t)count, sizeof *copy);
  for (uint64_t i = 0; copy != NULL && i < count; i++) {
    if (from[i] == NULL) continue;
    copy[i] = malloc(sizeof *copy[i]);
    if (copy[i] == NULL) {
      for (uint64_t k = 0; k < i; k++) free(copy[k]);
      free(copy);
      return NULL;
    }
    *copy[i] = *from[i];
  }
  return copy;
}

MTC_API void mtc_prepared_release(mtc_prepared *p) {
  if (p == NULL) return;
  free(p->leaves);
  free(p->extents);
  free(p->destinations);
  for (uint64_t i = 0; i < p->strided_count; i++) free(p->strided[i]);
  free(p->strided);
  mtc_layout_free(&p->layout);
  mtc_block_release(p->scatter_tables);
  free(p);
}

/* Refuses what the template cannot carry, and what submit would refuse. */
static mtc_status check_template(mtc_plan *plan) {
  static const char call[] = "mtc_prepared_create";
  if (mtc_plan_phase_of(plan) != MTC_PHASE_BUILDING) {
    return mtc_error_set(MTC_ERR_INVALID_STATE,
                         "%s: the plan was submitted already; a prepared copy "
                         "is made of a plan that is not",
                         call);
  }
  if (plan->stream_count > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: the plan has streams (mtc_plan_set_stream), "
                         "which belong to one copy: set them on each plan of "
                         "mtc_prepared_plan",
                         call);
  }
  for (uint64_t i = 0; i < plan->destination_block_capacity; i++) {
    if (plan->destination_blocks[i] == NULL) continue;
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: the plan has destination blocks "
                         "(mtc_plan_set_destination_blocks), which belong to "
                         "one copy: set them on each plan of mtc_prepared_plan",
                         call);
  }
  int64_t leaf;
  mtc_status status = mtc_plan_find_missing_device(plan, &leaf);
  if (status == MTC_OK) status = mtc_plan_find_overlap(plan, &leaf);
  return status;
}

MTC_API mtc_status mtc_prepared_create(mtc_plan *plan, mtc_prepared **out) {
  static const char call[] = "mtc_prepared_create";
  if (out != NULL) *out = NULL;
  if (plan == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: plan and out must not be NULL", call);
  }
  mtc_status status = check_template(plan);
  if (status != MTC_OK) return status;

  uint64_t n = plan->leaf_count;
  size_t some = (size_t)(n ? n : 1);
  mtc_prepared *p = calloc(1, sizeof *p);
  if (p == NULL) return out_of_memory(call);
  p->target = plan->target;
  p->options = plan->options;
  p->leaf_count = n;
  p->leaves = malloc(some * sizeof *p->leaves);
  p->extents = malloc(some * sizeof *p->extents);
  if (plan->destinations != NULL) {
    p->destinations = malloc(some * sizeof *p->destinations);
  }
  if (plan->strided_count > 0) {
    p->strided = copy_strided(plan->strided, plan->strided_count);
    p->strided_count = p->strided ? plan->strided_count : 0;
  }
  if (p->leaves == NULL || p->extents == NULL ||
      (plan->destinations != NULL && p->destinations == NULL) ||
      (plan->strided_count > 0 && p->strided == NULL)) {
    mtc_prepared_release(p);
    return out_of_memory(call);
  }
  memcpy(p->leaves, plan->leaves, (size_t)n * sizeof *p->leaves);
  if (p->destinations != NULL) {
    memcpy(p->destinations, plan->destinations, (size_t)n * sizeof *p->destinations);
  }
  p->unpinned = 1;
  for (uint64_t i = 0; i < n; i++) {
    /* What mtc_plan_add_leaves checked with the address: its rows or its
     * bytes, and what mtc_plan_set_leaf_layout did: the layout's reach. */
    uint64_t extent = mtc_plan_source_extent(plan, i);
    p->extents[i] = extent > p->leaves[i].bytes ? extent : p->leaves[i].bytes;
    if ((p->leaves[i].flags & MTC_LEAF_PINNED) ||
        (p->destinations && (p->destinations[i].flags & MTC_LEAF_PINNED))) {
      p->unpinned = 0;
    }
  }
  /* The layout submit makes of leaves in no pinned memory, cut as the
   * pinned pool's limit cuts chunks now. */
  p->chunk_limit = mtc_plan_chunk_limit(&plan->options, mtc_pinned_staging_max_bytes());
  status = mtc_plan_lay_out(plan, p->chunk_limit, NULL, &p->layout);
  if (status != MTC_OK) {
    mtc_prepared_release(p);
    return out_of_memory(call);
  }
  mtc_layout_count(&p->layout, p->leaves, &p->counts);
  /* Tables only where no leaf may turn out to lie in pinned memory, which
   * would lay each copy out afresh. */
  if (p->unpinned) {
    p->scatter_tables = mtc_prepared_tables_make(p->target, &p->layout, p->leaves,
                                                 p->destinations, n);
  }
  *out = p;
  return MTC_OK;
}

MTC_API uint64_t mtc_prepared_leaf_count(const mtc_prepared *p) {
  return p ? p->leaf_count : 0;
}

/* The leaf's flags as the caller gives them (the plan marks strided ones). */
static uint32_t flags_of(const mtc_leaf *leaf) {
  return leaf->flags & ~MTC_LEAF_STRIDED_INTERNAL;
}

/* `given` must be `kept` but for its address; else an error naming leaf
 * `index` and the first field that differs (whose: "" for a leaf, "its
 * destination's " for a destination). */
static mtc_status check_same(const mtc_leaf *given, const mtc_leaf *kept,
                             uint64_t index, const char *whose) {
  if (given->bytes == kept->bytes && given->row_pitch == kept->row_pitch &&
      given->device == kept->device && given->element_size == kept->element_size &&
      given->row_count == kept->row_count && flags_of(given) == flags_of(kept)) {
    return MTC_OK;
  }
  unsigned long long i = (unsigned long long)index;
  if (given->device != kept->device) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: %sdevice is %d but the prepared copy's is "
                         "%d (only addresses may change)",
                         i, whose, given->device, kept->device);
  }
  const char *field = "flags";
  uint64_t is = flags_of(given), was = flags_of(kept);
  if (given->bytes != kept->bytes) {
    field = "bytes", is = given->bytes, was = kept->bytes;
  } else if (given->element_size != kept->element_size) {
    field = "element_size", is = given->element_size, was = kept->element_size;
  } else if (given->row_count != kept->row_count) {
    field = "row_count", is = given->row_count, was = kept->row_count;
  } else if (given->row_pitch != kept->row_pitch) {
    field = "row_pitch", is = given->row_pitch, was = kept->row_pitch;
  }
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "leaf %llu: %s%s is %llu but the prepared copy's is "
                       "%llu (only addresses may change)",
                       i, whose, field, (unsigned long long)is,
                       (unsigned long long)was);
}

/* What a batch makes of the template: its leaves (the template's, with the
 * batch's addresses) and destinations, each checked, and whether every
 * address is the template's. */
typedef struct batch {
  mtc_leaf *leaves;
  mtc_leaf *destinations;
  mtc_strided **strided;
  mtc_layout layout;
  int same_addresses;
} batch;

static void batch_free(batch *b, uint64_t strided_count) {
  free(b->leaves);
  free(b->destinations);
  for (uint64_t i = 0; b->strided != NULL && i < strided_count; i++) free(b->strided[i]);
  free(b->strided);
  mtc_layout_free(&b->layout);
}

/* Nonzero when `given` differs from `kept` in a field but the address, or
 * its address fails a check (extent: the bytes its source spans). Without
 * a branch, so that a batch's leaves are checked at the speed of a copy;
 * a bad one is found again by the checks that say what is wrong. */
static inline uint64_t leaf_wrong(const mtc_leaf *given, const mtc_leaf *kept,
                                  uint64_t extent) {
  return (given->bytes ^ kept->bytes) | (given->row_pitch ^ kept->row_pitch) |
         (uint32_t)(given->device ^ kept->device) |
         (given->element_size ^ kept->element_size) |
         (given->row_count ^ kept->row_count) |
         (flags_of(given) ^ flags_of(kept)) |
         (uint64_t)((given->address == 0) & (given->bytes > 0)) |
         (uint64_t)(given->address > UINT64_MAX - extent);
}

/* The first wrong leaf's (or destination's) error; `given`: count entries. */
static mtc_status first_wrong(const mtc_leaf *given, const mtc_leaf *kept,
                              const uint64_t *extents, uint64_t count,
                              const char *call) {
  for (uint64_t i = 0; i < count; i++) {
    mtc_leaf leaf = given[i];
    mtc_status status = check_same(&leaf, &kept[i], i, extents ? "" : "its destination's ");
    if (status == MTC_OK) {
      status = extents ? mtc_plan_check_leaf_address(&leaf, extents[i], i)
                       : mtc_plan_check_destination_address(&leaf, i);
    }
    if (status != MTC_OK) return status;
  }
  /* The arrays changed while they were read (undefined). */
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "%s: the leaves changed during the call", call);
}

/* Fills b from the caller's arrays: all checked, nothing kept on error. */
static mtc_status read_batch(const mtc_prepared *p, const mtc_leaf *leaves,
                             const mtc_leaf *destinations, const char *call,
                             batch *b) {
  memset(b, 0, sizeof *b);
  uint64_t n = p->leaf_count;
  size_t some = (size_t)(n ? n : 1);
  b->leaves = malloc(some * sizeof *b->leaves);
  if (p->destinations != NULL) b->destinations = malloc(some * sizeof *b->destinations);
  if (b->leaves == NULL || (p->destinations != NULL && b->destinations == NULL)) {
    return out_of_memory(call);
  }
  uint64_t wrong = 0, moved = 0;
  for (uint64_t i = 0; i < n; i++) {
    const mtc_leaf given = leaves[i], *kept = &p->leaves[i];
    wrong |= leaf_wrong(&given, kept, p->extents[i]);
    b->leaves[i] = *kept;
    b->leaves[i].address = given.address;
    moved |= given.address ^ kept->address;
  }
  if (wrong != 0) return first_wrong(leaves, p->leaves, p->extents, n, call);
  if (p->destinations != NULL && destinations == NULL) {
    memcpy(b->destinations, p->destinations, (size_t)n * sizeof *b->destinations);
  }
  for (uint64_t i = 0; p->destinations != NULL && destinations != NULL && i < n; i++) {
    const mtc_leaf given = destinations[i], *kept = &p->destinations[i];
    wrong |= leaf_wrong(&given, kept, given.bytes);
    b->destinations[i] = *kept;
    b->destinations[i].address = given.address;
    moved |= given.address ^ kept->address;
  }
  if (wrong != 0) return first_wrong(destinations, p->destinations, NULL, n, call);
  b->same_addresses = moved == 0;
  if (p->strided_count > 0) {
    b->strided = copy_strided(p->strided, p->strided_count);
    if (b->strided == NULL) return out_of_memory(call);
  }
  if (mtc_layout_copy(&p->layout, &b->layout) != MTC_OK) return out_of_memory(call);
  return MTC_OK;
}

/* mtc_prepared_plan, its calls' name in messages being `call`. */
static mtc_status make_plan(mtc_prepared *p, const mtc_leaf *leaves,
                            const mtc_leaf *destinations, uint64_t count,
                            mtc_plan **out_plan, const char *call) {
  if (out_plan != NULL) *out_plan = NULL;
  if (p == NULL || out_plan == NULL || (leaves == NULL && count > 0)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: prepared, leaves and out_plan must not be NULL",
                         call);
  }
  if (count != p->leaf_count) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: count is %llu but the prepared copy has %llu "
                         "leaves",
                         call, (unsigned long long)count,
                         (unsigned long long)p->leaf_count);
  }
  if (destinations != NULL && p->destinations == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: destinations given, but the prepared copy was "
                         "made of a plan without them",
                         call);
  }
  batch b;
  mtc_status status = read_batch(p, leaves, destinations, call, &b);
  mtc_plan *plan = NULL;
  if (status == MTC_OK) status = mtc_plan_create(p->target, &p->options, &plan);
  if (status != MTC_OK) {
    batch_free(&b, p->strided_count);
    return status;
  }
  plan->leaves = b.leaves;
  plan->leaf_count = plan->leaf_capacity = p->leaf_count;
  plan->destinations = b.destinations;
  plan->into = p->destinations != NULL ? 1 : (p->leaf_count > 0 ? -1 : 0);
  plan->strided = b.strided;
  plan->strided_count = b.strided ? p->strided_count : 0;
  plan->layout = b.layout;
  plan->prepared.laid_out = 1;
  plan->prepared.chunk_limit = p->chunk_limit;
  plan->prepared.counts = p->counts;
  plan->prepared.devices_checked = 1;
  /* The template's addresses were checked for overlaps when it was made. */
  plan->prepared.apart = b.same_addresses || p->destinations == NULL;
  plan->prepared.unpinned = p->unpinned;
  if (p->scatter_tables != NULL && destinations == NULL) {
    mtc_block_retain(p->scatter_tables);
    plan->prepared.scatter_tables = p->scatter_tables;
  }
  *out_plan = plan;
  return MTC_OK;
}

MTC_API mtc_status mtc_prepared_plan(mtc_prepared *p, const mtc_leaf *leaves,
                                     const mtc_leaf *destinations,
                                     uint64_t count, mtc_plan **out_plan) {
  return make_plan(p, leaves, destinations, count, out_plan, "mtc_prepared_plan");
}

MTC_API mtc_status mtc_prepared_submit(mtc_prepared *p, const mtc_leaf *leaves,
                                       const mtc_leaf *destinations,
                                       uint64_t count, mtc_plan **out_plan) {
  mtc_plan *plan;
  mtc_status status =
      make_plan(p, leaves, destinations, count, out_plan, "mtc_prepared_submit");
  if (status != MTC_OK) return status;
  plan = *out_plan;
  status = mtc_plan_submit(plan);
  if (status == MTC_OK) return MTC_OK;
  /* Failed at once: the caller gets no plan, and the message, which
   * names the leaf the plan blamed (as "leaf N: ", the form of the other
   * per-leaf messages) since the plan that held it is released here. */
  *out_plan = NULL;
  char why[MTC_ERROR_CAPACITY];
  int64_t leaf = mtc_plan_error_leaf(plan);
  if (leaf >= 0 && strncmp(mtc_error_text(), "leaf ", 5) != 0) {
    mtc_format(why, sizeof why, "leaf %llu: %s", (unsigned long long)leaf,
               mtc_error_text());
  } else {
    mtc_format(why, sizeof why, "%s", mtc_error_text());
  }
  mtc_plan_release(plan);
  return mtc_error_set_text(status, why);
}
