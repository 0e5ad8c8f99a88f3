/* launch_blocks.c — mtc_kernel_launch: the caller's launch, with a
 * reference to each block its kernel uses taken here and handed to the
 * launch (cuda/launch.c), which drops it with mtc_block_release once the
 * stream has passed the launch. Blocks are this folder's; cuda/ below it
 * holds them only through the release function it is given. */
#include "cuda/launch.h"
#include "memory/block.h"

static void release_block(mtc_block *block) { mtc_block_release(block); }

MTC_API mtc_status mtc_kernel_launch(mtc_module *module, uint64_t function,
                                     uint64_t stream, const uint32_t *dims,
                                     const void *params, uint64_t params_bytes,
                                     const uint32_t *param_offsets,
                                     uint32_t param_count,
                                     mtc_block *const *blocks,
                                     uint32_t block_count) {
  if (blocks != NULL) {
    for (uint32_t i = 0; i < block_count; i++) mtc_block_retain(blocks[i]);
  }
  mtc_status status = mtc_launch_queue(module, function, stream, dims, params,
                                       params_bytes, param_offsets,
                                       param_count, blocks, block_count,
                                       release_block);
  if (status != MTC_OK && blocks != NULL) {
    /* Not the last references: the caller still holds its own. */
    for (uint32_t i = 0; i < block_count; i++) mtc_block_release(blocks[i]);
  }
  return status;
}
