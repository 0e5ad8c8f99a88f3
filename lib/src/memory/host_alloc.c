/* host_alloc.c — mtc_host_block_alloc: page-locked host memory as a block
 * the caller holds and fills (pinned tensors, arenas), which copies then
 * read or write in place, or pageable memory where there is no CUDA device
 * at all; and its limit. */
#include <stdint.h>

#include "base/error.h"
#include "cuda/driver.h"
#include "memory/block.h"

/* No driver, or a driver with no device: nothing can page-lock memory, and
 * no copy can DMA from it. Code written for both kinds of machine then
 * gets host memory it uses the same way (mtc/pinned.h). A device ordinal
 * past the devices of a machine that has some stays an error. */
static int no_cuda_device(mtc_status status) {
  if (status == MTC_ERR_NO_DRIVER) return 1;
  int count = -1;
  return status == MTC_ERR_NO_DEVICE &&
         mtc_cuda_device_count_internal(&count) == MTC_OK && count == 0;
}

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
  if (status != MTC_OK && no_cuda_device(status)) {
    return mtc_block_new_host(bytes, out_block);
  }
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
