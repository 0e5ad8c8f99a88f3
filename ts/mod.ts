/**
 * multi-tensor-copier: copy nested batches of many small tensors between
 * host memory and CUDA GPUs from Bun and Deno, in one packed, pinned,
 * asynchronous copy per batch.
 *
 * @example
 * ```ts
 * import { startCopy, Tensor } from "./ts/mod.ts";
 *
 * const batch = [{ boxes: new Tensor(new Float32Array(8), [2, 4]), ids: new BigInt64Array(2), name: "a" }];
 * const onGpu = await startCopy(batch, "cuda:0");   // [{ boxes: DeviceTensor, ids: DeviceTensor, name: "a" }]
 * const back = onGpu[0].boxes.toHost();              // Tensor [2, 4] float32
 * ```
 *
 * @module
 */

export {
  AsyncCopyHandle,
  type Copied,
  type HostLeaf,
  type OnAnyDevice,
  type OnDevice,
  type OnHost,
  startCopy,
} from "./copy.ts";
export { type Device } from "./device.ts";
export { DeviceTensor } from "./device_tensor.ts";
export { disposeAll } from "./dispose.ts";
export { type DType, DTYPES, type Float16ArrayLike, type TypedArray } from "./dtype.ts";
export { MtcError, Status, type StatusName } from "./errors.ts";
export { cudaDeviceCount, libraryVersion, poolStats, type PoolStats, trimPools } from "./info.ts";
export { type CopyOptions, DEFAULT_OPTIONS } from "./options.ts";
export { Tensor } from "./tensor.ts";
