/**
 * startCopy: one copy of a whole batch, with a constant number of FFI calls
 * however many leaves it has.
 *
 * @module
 */

import { CURRENT_CUDA, DEVICE_CPU, type Device, parseDevice } from "../gpu/device.ts";
import { type Descriptors, releaseDescriptors, takeDescriptors, writeLeaves } from "./describe.ts";
import { type DeviceTensor, setCopyToHost } from "../tensor/device_tensor.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import { MtcError, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import type { NativeSymbols } from "../ffi/symbols.ts";
import { AsyncCopyHandle } from "./handle.ts";
import { ownedCopy } from "../tensor/host_output.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE, resolveOptions } from "./options.ts";
import { addRecord, planError, type PlanRecord, releaseRecord, u64At } from "./plan_record.ts";
import { openScopes, type Stream, streamFor } from "../gpu/stream.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { traverse } from "./walk.ts";

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

// ------------------------------------------------------------- helpers

const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);
const outWords = new Uint32Array(2); // mtc_plan **, int32_t * out-parameters

/** The current CUDA device of this thread ("cuda"). */
function currentCudaDevice(sym: NativeSymbols): number {
  const status = sym.mtc_cuda_current_device(outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_last_error() || statusName(status));
  return outWords[0]! | 0;
}

/** Tells the plan the stream of each device involved: explicit ones first, else the current stream. */
function bindStreams(
  sym: NativeSymbols,
  plan: number,
  target: number,
  sourceDevices: readonly number[],
  explicit: readonly Stream[] | null,
): void {
  const bound: number[] = []; // devices told already: one stream per device
  const bind = (device: number, stream: Stream) => {
    if (bound.includes(device)) return;
    bound.push(device);
    stream.checkLive();
    const setStream = requireSymbol("mtc_plan_set_stream", "streams");
    const status = setStream(plan, device, stream.handle);
    if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status));
  };
  if (explicit !== null) {
    for (const stream of explicit) {
      const device = stream.deviceIndex;
      if (device === target || sourceDevices.includes(device)) bind(device, stream);
    }
  }
  if (openScopes === 0) return;
  if (target !== DEVICE_CPU) {
    const current = streamFor(target);
    if (current !== null) bind(target, current);
  }
  for (const device of sourceDevices) {
    const current = streamFor(device);
    if (current !== null) bind(device, current);
  }
}

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
  if (target === CURRENT_CUDA) target = currentCudaDevice(library().symbols);
  const t = traverse(data, target);
  if (t.leaves.length === 0) {
    return new AsyncCopyHandle<Copied<T, D>>(null, target, t.root[0] as Copied<T, D>, t.reused);
  }

  const lib = library();
  const sym = lib.symbols;
  encodeOptions(resolved, optionsView);
  const created = sym.mtc_plan_create(target, optionsBytes, outWords);
  if (created !== Status.MTC_OK) throw new MtcError(created, sym.mtc_last_error() || statusName(created));
  const plan = u64At(outWords, 0);
  const record: PlanRecord = { plan, traversal: t, shares: [] };
  addRecord(lib, record);
  // Module buffers, unless a getter on a leaf is starting this copy inside another.
  const d: Descriptors = takeDescriptors();
  try {
    writeLeaves(lib, t, record.shares, d);
    let status = sym.mtc_plan_add_leaves(plan, d.words, t.leaves.length);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
    if (openScopes !== 0 || streams !== null) bindStreams(sym, plan, target, d.sourceDevices, streams);
    status = sym.mtc_plan_submit(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  } catch (e) {
    releaseRecord(record);
    throw e;
  } finally {
    releaseDescriptors(d);
  }
  return new AsyncCopyHandle<Copied<T, D>>(record, target, undefined, t.reused);
}
