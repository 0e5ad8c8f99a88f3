/* launch.h — a launch of the caller's kernel with the blocks it uses held
 * until its stream has passed it (launch.c); mtc_launches_settle gives
 * them back. memory/launch_blocks.c is the public mtc_kernel_launch. */
#ifndef MTC_CUDA_LAUNCH_H
#define MTC_CUDA_LAUNCH_H

#include <stdint.h>

#include "cuda/user_module.h"
#include "mtc.h"

/* Checks and queues the launch as mtc_kernel_launch (mtc.h) describes,
 * then keeps one reference to each non-NULL block, which the caller took
 * for it, until an event recorded after the launch has completed, and
 * drops each with `release` then. On MTC_OK the references are the
 * launch's; on an error it keeps none (the caller still owns them). */
mtc_status mtc_launch_queue(mtc_module *module, uint64_t function,
                            uint64_t stream, const uint32_t *dims,
                            const void *params, uint64_t params_bytes,
                            const uint32_t *param_offsets, uint32_t param_count,
                            mtc_block *const *blocks, uint32_t block_count,
                            void (*release)(mtc_block *block));

#endif
