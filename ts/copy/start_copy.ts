/**
 * startCopy: one copy of a whole batch, with a constant number of FFI calls
 * however many leaves it has. It runs the stages in turn: walk and describe
 * in one pass over the batch (walk.ts, describe.ts), submit (submit.ts),
 * then the result objects, made while the C pipeline copies (results.ts);
 * the handle (handle.ts) waits and settles them.
 *
 * @module
 */

import { CURRENT_CUDA, type Device, parseDevice } from "../gpu/device.ts";
import { library } from "../ffi/library.ts";
import type { Stream } from "../gpu/stream.ts";
import { setCopyToHost } from "../tensor/device_tensor.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import { ownedCopy } from "../tensor/host_output.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { releaseDescriptors, takeDescriptors } from "./describe.ts";
import { type AsyncCopyHandle, newHandle } from "./handle.ts";
import { type CopyOptions, resolveOptions } from "./options.ts";
import type { PlanRecord } from "./plan_record.ts";
import { currentCudaDevice, submitPlan } from "./submit.ts";
import type { Traversal } from "./traversal.ts";
import { walk } from "./walk.ts";

export { AsyncCopyHandle } from "./handle.ts";
export type { Copied, HostLeaf, OnAnyDevice, OnDevice, OnHost, PassThrough } from "./types.ts";
import type { Copied } from "./types.ts";

// DeviceTensor.toHost(): a copy to "cpu", copied out of the pinned block so
// that the block goes back at once.
setCopyToHost((tensor) => {
  const handle = startCopy(tensor, "cpu");
  try {
    return ownedCopy(handle.get() as TypedArray | Tensor);
  } finally {
    handle.dispose();
  }
});

// ------------------------------------------------------------ startCopy

/**
 * Starts copying every tensor leaf of `data` to `device` and returns at once
 * (staging and submission run on the C library's background thread).
 *
 * `data` is any nesting of arrays, plain objects and Maps; its leaves are
 * typed arrays (1-D tensors), {@link Tensor}s and {@link DeviceTensor}s. The
 * result mirrors it with new containers; tensors already on `device` are
 * reused as they are (the same object), and everything else (numbers,
 * strings, null, class instances, DataViews, Sets, ...) passes through by
 * identity. Sources may mix host leaves and DeviceTensors of several
 * devices.
 *
 * Copies to "cpu" give typed arrays (1-D, natural dtype) or Tensors that
 * VIEW the pinned host memory the copy filled (zero-copy): the outputs of
 * one copy usually share one pinned block, which goes back to the library's
 * pool when the garbage collector frees the last of them, or at once with
 * {@link releaseHostOutput} / `disposeAll` (which empty every view of it).
 *
 * Streams: the copy is ordered against the current stream of every device
 * involved ({@link withStream}): DeviceTensor sources are read after the
 * work queued on their device's current stream before this call, and the
 * target's current stream waits for the copy. Without a current stream the
 * copy is ordered with nothing the caller queued: synchronize first.
 *
 * Inputs must stay unchanged until the copy is over (`ready()` is true).
 * Throws MtcError at once for a bad device, bad options, a cycle, a bad or
 * disposed leaf (with its path), or a target the driver cannot serve.
 *
 * @example
 * ```ts
 * const handle = startCopy({ boxes: new Tensor(new Float32Array(8), [2, 4]), id: 7 }, "cuda:0");
 * const onGpu = await handle;        // { boxes: DeviceTensor, id: 7 }
 * const back = await startCopy(onGpu, "cpu"); // { boxes: Tensor viewing pinned memory, id: 7 }
 * disposeAll([onGpu, back]);
 * ```
 */
export function startCopy<T, D extends Device>(
  data: T,
  device: D,
  options?: CopyOptions,
): AsyncCopyHandle<Copied<T, D>> {
  return startCopyWith(data, device, options, null);
}

/**
 * @internal startCopy with streams to order the copy against, besides the
 * current ones: for each device involved (the target, a source device), an
 * explicit stream here wins over that device's current stream.
 */
export function startCopyWith<T, D extends Device>(
  data: T,
  device: D,
  options: CopyOptions | undefined,
  streams: readonly Stream[] | null,
): AsyncCopyHandle<Copied<T, D>> {
  let target = parseDevice(device);
  const resolved = resolveOptions(options);
  const lib = library();
  if (target === CURRENT_CUDA) target = currentCudaDevice(lib.symbols);
  // Host addresses are read at submit, eight leaves a call (a libmtc without that call: one by one in the walk).
  const bulk = lib.symbols.mtc_leaves_set_addresses !== undefined;
  // Module buffers, unless a getter on a leaf is starting this copy inside another.
  const d = takeDescriptors();
  let record: PlanRecord;
  let t: Traversal;
  try {
    t = walk(data, target, d, bulk ? null : lib.backend.pointerOf, resolved);
    t.pageableResults = !resolved.usePinnedStaging;
    if (t.count === 0) {
      return newHandle<Copied<T, D>>(null, target, t.root[0] as Copied<T, D>, t.reused);
    }
    record = submitPlan(lib, t, resolved, streams, bulk);
  } finally {
    releaseDescriptors(d);
  }
  return newHandle<Copied<T, D>>(record, target, undefined, t.reused);
}
