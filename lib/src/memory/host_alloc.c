/* host_alloc.c — mtc_host_block_alloc: page-locked host memory as a block
 * the caller holds and fills (pinned tensors, arenas), which copies then
 * read or write in place; and its limit. */
#include <stdint.h>

#include "base/error.h"
#include "memory/block.h"

static const char call[] = "mtc_host_block_alloc";

MTC_API mtc_status mtc_host_block_alloc(int32_t device, uint64_t bytes,
                                        mtc_block **out_block) {
  if (out_block == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: out_block must not be NULL", call);
  }
  *out_block = NULL;
  if (device < 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: device %d is not a CUDA device ordinal (0, 1, "
                         "...): pinned memory is allocated through a "
                         "device's context", call, device);
  }
  if (bytes == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT, "%s: bytes must be > 0",
                         call);
  }
  mtc_device *d;
  mtc_status status = mtc_device_get(device, &d);
  if (status != MTC_OK) return status;
  status = mtc_block_new_pinned(d, bytes, MTC_PINNED_HELD, out_block);
  if (status != MTC_OK) {
    char why[MTC_ERROR_CAPACITY];
    mtc_format(why, sizeof why, "%s", mtc_error_text());
    mtc_error_set(status, "%s: %llu bytes: %s", call,
                  (unsigned long long)bytes, why);
  }
  return status;
}

MTC_API mtc_status mtc_set_pinned_held_limit(uint64_t bytes) {
  return mtc_pinned_set_held_limit(bytes);
}
