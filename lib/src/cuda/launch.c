/* launch.c — launches of the caller's kernels (mtc_launch_queue, under
 * memory/'s mtc_kernel_launch) and mtc_launches_settle: the blocks a launch
 * uses are held until its stream has passed it.
 *
 * A block's memory goes back to its device's pool in the order of the
 * library's copy stream, which knows nothing of the caller's streams; so a
 * launch keeps the references it was handed, records an event after itself,
 * and drops them once that event has completed: found by a later launch,
 * mtc_stream_synchronize or mtc_launches_settle. Blocks are memory/'s: this
 * file never retains or releases one itself, it calls the release function
 * it was handed (a folder calls only itself and the folders after it). */
#include "cuda/launch.h"

#include <stdlib.h>

#include "base/error.h"
#include "cuda/user_module.h"

#define MAX_PARAMS 4096u

/* One launch whose blocks are held until `event` has completed. */
typedef struct held_launch {
  struct held_launch *next;
  mtc_device *device;
  CUevent event;
  void (*release)(mtc_block *block);
  uint32_t count;
  mtc_block *blocks[];
} held_launch;

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static held_launch *held_first;

static void release_held(held_launch *h) {
  for (uint32_t i = 0; i < h->count; i++) h->release(h->blocks[i]);
  mtc_device_event_release(h->device, h->event);
  free(h);
}

MTC_API uint32_t mtc_launches_settle(int32_t wait) {
  const mtc_cuda_api *cu;
  if (mtc_cuda_load(&cu) != MTC_OK) return 0;
  held_launch *done = NULL;
  uint32_t left = 0;
  pthread_mutex_lock(&held_lock);
  for (held_launch **p = &held_first; *p != NULL;) {
    held_launch *h = *p;
    /* A failed query (a faulted kernel) ends the launch too: its context
     * runs nothing more. */
    if (wait || cu->cuEventQuery(h->event) != CUDA_ERROR_NOT_READY) {
      *p = h->next;
      h->next = done;
      done = h;
    } else {
      p = &h->next;
      left++;
    }
  }
  pthread_mutex_unlock(&held_lock);
  while (done != NULL) {
    held_launch *h = done;
    done = h->next;
    if (wait) cu->cuEventSynchronize(h->event);
    release_held(h);
  }
  return left;
}

/* Keeps the launch's references to its blocks until an event recorded on
 * stream now has completed. The context of d is current. On failure it
 * keeps none (the stream was synchronized: nothing needs holding). */
static mtc_status hold_blocks(const mtc_cuda_api *cu, mtc_device *d,
                              CUstream stream, mtc_block *const *blocks,
                              uint32_t block_count,
                              void (*release)(mtc_block *block)) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < block_count; i++) count += blocks[i] != NULL;
  if (count == 0) return MTC_OK;
  held_launch *h = malloc(sizeof *h + count * sizeof h->blocks[0]);
  if (h == NULL) {
    cu->cuStreamSynchronize(stream); /* then nothing needs holding */
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  mtc_status status = mtc_device_event_acquire(d, &h->event);
  if (status == MTC_OK) {
    CUresult r = cu->cuEventRecord(h->event, stream);
    if (r != CUDA_SUCCESS) {
      mtc_device_event_release(d, h->event);
      status = mtc_cuda_fail(r, "mtc_kernel_launch: cuEventRecord");
    }
  }
  if (status != MTC_OK) {
    cu->cuStreamSynchronize(stream);
    free(h);
    return status;
  }
  h->device = d;
  h->release = release;
  h->count = 0;
  for (uint32_t i = 0; i < block_count; i++) {
    if (blocks[i] != NULL) h->blocks[h->count++] = blocks[i];
  }
  pthread_mutex_lock(&held_lock);
  h->next = held_first;
  held_first = h;
  pthread_mutex_unlock(&held_lock);
  return MTC_OK;
}

static mtc_status check_launch(mtc_module *module, uint64_t function,
                               uint64_t stream, const uint32_t *dims,
                               const void *params, uint64_t params_bytes,
                               const uint32_t *param_offsets,
                               uint32_t param_count) {
  static const char call[] = "mtc_kernel_launch";
  if (module == NULL || function == 0 || dims == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: module, function and dims must not be NULL / 0",
                         call);
  }
  if (stream == 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: stream is 0; pass a CUstream", call);
  }
  for (int i = 0; i < 6; i++) {
    if (dims[i] == 0) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "%s: %s %c is 0 (grid %ux%ux%u, block %ux%ux%u): "
                           "every extent must be at least 1",
                           call, i < 3 ? "grid" : "block", "xyz"[i % 3],
                           dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]);
    }
  }
  if (param_count > MAX_PARAMS) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: %u parameters (at most %u)", call, param_count,
                         MAX_PARAMS);
  }
  if (param_count > 0 && (params == NULL || param_offsets == NULL)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: %u parameters but params or param_offsets is "
                         "NULL",
                         call, param_count);
  }
  for (uint32_t i = 0; i < param_count; i++) {
    if (param_offsets[i] >= params_bytes) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "%s: parameter %u at offset %u lies outside the "
                           "%llu bytes of params",
                           call, i, param_offsets[i],
                           (unsigned long long)params_bytes);
    }
  }
  return MTC_OK;
}

mtc_status mtc_launch_queue(mtc_module *module, uint64_t function,
                            uint64_t stream, const uint32_t *dims,
                            const void *params, uint64_t params_bytes,
                            const uint32_t *param_offsets, uint32_t param_count,
                            mtc_block *const *blocks, uint32_t block_count,
                            void (*release)(mtc_block *block)) {
  mtc_status status = check_launch(module, function, stream, dims, params,
                                   params_bytes, param_offsets, param_count);
  if (status != MTC_OK) return status;
  if (block_count > 0 && blocks == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "mtc_kernel_launch: %u blocks but blocks is NULL",
                         block_count);
  }
  const mtc_cuda_api *cu;
  status = mtc_cuda_load(&cu);
  if (status != MTC_OK) return status;
  mtc_launches_settle(0); /* what earlier launches no longer need */
  void **args = calloc(param_count > 0 ? param_count : 1, sizeof *args);
  if (args == NULL) return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (uint32_t i = 0; i < param_count; i++) {
    args[i] = (char *)params + param_offsets[i];
  }
  CUstream s = (CUstream)(uintptr_t)stream;
  mtc_context_scope scope;
  mtc_context_scope_begin(&scope);
  status = mtc_context_scope_use(&scope, module->device);
  if (status == MTC_OK) {
    CUresult r = cu->cuLaunchKernel((CUfunction)(uintptr_t)function, dims[0],
                                    dims[1], dims[2], dims[3], dims[4], dims[5],
                                    dims[6], s, args, NULL);
    if (r != CUDA_SUCCESS) {
      status = mtc_cuda_fail(r, "mtc_kernel_launch: cuLaunchKernel");
    } else {
      status = hold_blocks(cu, module->device, s, blocks, block_count, release);
    }
  }
  mtc_context_scope_end(&scope);
  free(args);
  return status;
}
