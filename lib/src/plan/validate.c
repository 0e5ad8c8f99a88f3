/* validate.c — what makes a leaf acceptable: checked as leaves are added
 * (its own fields, its destination) and at submit (its device exists on
 * this machine). Overlaps of sources and destinations: overlap.c. */
#include "plan/validate.h"

#include "cuda/driver.h"
#include "plan/phase.h"

/* The messages of the checks that depend on an address (a prepared copy
 * makes those alone). */
static mtc_status zero_address(const mtc_leaf *leaf, unsigned long long i) {
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "leaf %llu: address is 0 but bytes is %llu", i,
                       (unsigned long long)leaf->bytes);
}

static mtc_status past_the_end(unsigned long long i) {
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "leaf %llu: address + size overflows the address "
                       "space",
                       i);
}

static mtc_status zero_destination(unsigned long long i) {
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "leaf %llu: its destination's address is 0", i);
}

static mtc_status destination_past_the_end(unsigned long long i) {
  return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                       "leaf %llu: its destination's address + bytes "
                       "overflows the address space",
                       i);
}

mtc_status mtc_plan_check_leaf_address(const mtc_leaf *leaf, uint64_t extent,
                                       uint64_t index) {
  if (leaf->address == 0 && leaf->bytes > 0) {
    return zero_address(leaf, (unsigned long long)index);
  }
  if (leaf->address > UINT64_MAX - extent) {
    return past_the_end((unsigned long long)index);
  }
  return MTC_OK;
}

mtc_status mtc_plan_check_destination_address(const mtc_leaf *destination,
                                              uint64_t index) {
  if (destination->address == 0 && destination->bytes > 0) {
    return zero_destination((unsigned long long)index);
  }
  if (destination->address > UINT64_MAX - destination->bytes) {
    return destination_past_the_end((unsigned long long)index);
  }
  return MTC_OK;
}

/* Checks one leaf; index is its index in the plan. */
mtc_status mtc_plan_check_leaf(const mtc_leaf *leaf, uint64_t index) {
  unsigned long long i = (unsigned long long)index;
  if (leaf->address == 0 && leaf->bytes > 0) return zero_address(leaf, i);
  switch (leaf->element_size) {
    case 1: case 2: case 4: case 8: case 16:
      break;
    default:
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: element_size is %u; it must be 1, 2, "
                           "4, 8 or 16",
                           i, leaf->element_size);
  }
  if (leaf->device < MTC_DEVICE_CPU) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: device %d is neither MTC_DEVICE_CPU (-1) "
                         "nor a CUDA ordinal",
                         i, leaf->device);
  }
  uint64_t extent = leaf->bytes; /* bytes the source spans */
  if (leaf->row_count > 1) {
    if (leaf->device != MTC_DEVICE_CPU) {
      return mtc_error_set(MTC_ERR_UNSUPPORTED,
                           "leaf %llu: strided (row_count > 1) leaves must be "
                           "in host memory; cuda:%d leaves must be contiguous",
                           i, leaf->device);
    }
    if (leaf->bytes % leaf->row_count != 0) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: bytes %llu is not a multiple of "
                           "row_count %u",
                           i, (unsigned long long)leaf->bytes, leaf->row_count);
    }
    uint64_t row_bytes = leaf->bytes / leaf->row_count;
    if (leaf->row_pitch < row_bytes) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: row_pitch %llu is less than the row "
                           "size %llu (bytes / row_count): rows would overlap",
                           i, (unsigned long long)leaf->row_pitch,
                           (unsigned long long)row_bytes);
    }
    uint64_t rows_before_last = leaf->row_count - 1;
    if (leaf->row_pitch > (UINT64_MAX - row_bytes) / rows_before_last) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "leaf %llu: row_pitch %llu times row_count %u "
                           "overflows the address space",
                           i, (unsigned long long)leaf->row_pitch,
                           leaf->row_count);
    }
    extent = leaf->row_pitch * rows_before_last + row_bytes;
  }
  if (leaf->address > UINT64_MAX - extent) return past_the_end(i);
  return MTC_OK;
}

/* Every CUDA leaf must name a device this machine has. */
mtc_status mtc_plan_find_missing_device(const mtc_plan *plan, int64_t *leaf) {
  int device_count = -1;
  for (uint64_t i = 0; i < plan->leaf_count; i++) {
    int32_t device = plan->leaves[i].device;
    if (device == MTC_DEVICE_CPU) continue;
    *leaf = (int64_t)i;
    if (device_count < 0) {
      mtc_status status = mtc_cuda_device_count_internal(&device_count);
      if (status != MTC_OK) {
        char why[MTC_ERROR_CAPACITY];
        mtc_format(why, sizeof why, "%s", mtc_error_text());
        return mtc_error_set(status, "leaf %llu: on cuda:%d, but %s",
                             (unsigned long long)i, device, why);
      }
    }
    if (device >= device_count) {
      return mtc_error_set(MTC_ERR_NO_DEVICE,
                           "leaf %llu: cuda:%d requested but this machine "
                           "has %d CUDA device%s",
                           (unsigned long long)i, device, device_count,
                           device_count == 1 ? "" : "s");
    }
  }
  *leaf = -1;
  return MTC_OK;
}

mtc_status mtc_plan_check_leaf_devices(mtc_plan *plan) {
  int64_t leaf;
  mtc_status status = mtc_plan_find_missing_device(plan, &leaf);
  return status == MTC_OK ? MTC_OK : mtc_plan_fail_submit(plan, status, leaf);
}

/* Checks a layout for `leaf` (index in the plan): see mtc_plan_set_leaf_layout. */
mtc_status mtc_plan_check_layout(const mtc_leaf *leaf,
                                 const mtc_leaf_layout *layout,
                                 uint64_t index) {
  unsigned long long i = (unsigned long long)index;
  if (layout->struct_size < sizeof(mtc_leaf_layout)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: layout struct_size is %u; it must be at "
                         "least %u",
                         i, layout->struct_size,
                         (unsigned)sizeof(mtc_leaf_layout));
  }
  if (leaf->device != MTC_DEVICE_CPU) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "leaf %llu: strided leaves must be in host memory; "
                         "cuda:%d leaves must be contiguous",
                         i, leaf->device);
  }
  if (leaf->row_count > 1) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "leaf %llu: a leaf with row_count %u cannot also "
                         "have a layout",
                         i, leaf->row_count);
  }
  if (layout->rank < 1 || layout->rank > MTC_LAYOUT_MAX_RANK) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: layout rank %u is not 1..%d", i,
                         layout->rank, MTC_LAYOUT_MAX_RANK);
  }
  uint64_t elements = 1, reach = 0;
  int overflow = 0, empty = 0;
  for (uint32_t d = 0; d < layout->rank; d++) {
    uint64_t extent = layout->shape[d];
    if (extent == 0) {
      empty = 1;
      continue;
    }
    if (elements > UINT64_MAX / extent) overflow = 1;
    else elements *= extent;
    uint64_t stride = layout->byte_strides[d];
    if (stride != 0 && extent - 1 > (UINT64_MAX - reach) / stride) overflow = 1;
    else reach += (extent - 1) * stride;
  }
  if (empty) elements = 0;
  if (!empty && overflow) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: the layout's shape and strides overflow "
                         "the address space",
                         i);
  }
  if (elements > UINT64_MAX / leaf->element_size ||
      elements * leaf->element_size != leaf->bytes) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: the layout's shape has %llu elements of "
                         "%u bytes but the leaf has %llu bytes",
                         i, (unsigned long long)elements, leaf->element_size,
                         (unsigned long long)leaf->bytes);
  }
  if (!empty && (reach > UINT64_MAX - leaf->element_size ||
                 leaf->address > UINT64_MAX - leaf->element_size - reach)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: the layout reaches past the end of the "
                         "address space",
                         i);
  }
  return MTC_OK;
}

/* The device's name in messages: "cuda:N" or "host memory". */
static void device_name(char *out, size_t size, int32_t device) {
  if (device == MTC_DEVICE_CPU) mtc_format(out, size, "host memory");
  else mtc_format(out, size, "cuda:%d", device);
}

mtc_status mtc_plan_check_destination(const mtc_plan *plan,
                                      const mtc_leaf *leaf,
                                      const mtc_leaf *destination,
                                      uint64_t index) {
  unsigned long long i = (unsigned long long)index;
  if (destination->bytes != leaf->bytes) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: its destination holds %llu bytes but the "
                         "leaf has %llu",
                         i, (unsigned long long)destination->bytes,
                         (unsigned long long)leaf->bytes);
  }
  if (destination->element_size != leaf->element_size) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: its destination has %u-byte elements but "
                         "the leaf %u-byte ones",
                         i, destination->element_size, leaf->element_size);
  }
  if (destination->address == 0 && destination->bytes > 0) {
    return zero_destination(i);
  }
  if (destination->row_count > 1) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "leaf %llu: its destination has row_count %u; "
                         "destinations must be contiguous",
                         i, destination->row_count);
  }
  if (destination->address > UINT64_MAX - destination->bytes) {
    return destination_past_the_end(i);
  }
  if (destination->device != plan->target) {
    char where[32], target[32];
    device_name(where, sizeof where, destination->device);
    device_name(target, sizeof target, plan->target);
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "leaf %llu: its destination is in %s but the plan "
                         "copies to %s",
                         i, where, target);
  }
  return MTC_OK;
}
