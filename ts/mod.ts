/**
 * multi-tensor-copier: copy nested batches of many small tensors between
 * host memory and CUDA GPUs from Bun and Deno, in one packed, pinned,
 * asynchronous copy per batch.
 *
 * @example
 * ```ts
 * import { startCopy, Tensor } from "multi-tensor-copier";
 *
 * const batch = [{ boxes: new Tensor(new Float32Array(8), [2, 4]), ids: new BigInt64Array(2), name: "a" }];
 * const onGpu = await startCopy(batch, "cuda:0");   // [{ boxes: DeviceTensor, ids: DeviceTensor, name: "a" }]
 * const back = onGpu[0]!.boxes.toHost();             // Tensor [2, 4] float32
 * ```
 *
 * Streams, device-to-device operators and prefetching:
 *
 * ```ts
 * import { disposeAll, prefetch, Stream, ToDevice, withStream } from "multi-tensor-copier";
 *
 * const compute = Stream.create("cuda:0");
 * // The copy waits for nothing of yours, and `compute` waits for the copy:
 * const onGpu = await withStream(compute, () => startCopy(batch, "cuda:0"));
 *
 * const toGpu1 = new ToDevice("cuda:0", "cuda:1");
 * const onGpu1 = toGpu1.forward(onGpu);                  // and toGpu1.adjoint() moves back
 *
 * for await (const b of prefetch(batches, "cuda:0", { depth: 2 })) {
 *   train(b);
 *   disposeAll(b);
 * }
 * ```
 *
 * @module
 */

// First: outside Bun and Deno, the import stops here, saying so.
import "./base/supported_runtime.ts";

export {
  AsyncCopyHandle,
  type Copied,
  type HostLeaf,
  type OnAnyDevice,
  type OnDevice,
  type OnHost,
  type PassThrough,
  startCopy,
} from "./copy/start_copy.ts";
export { copyInto } from "./copy/copy_into.ts";
export { prepareCopy, PreparedCopy } from "./copy/prepared.ts";
export { prepareCopyInto, PreparedCopyInto } from "./copy/prepared_into.ts";
export { type Device } from "./gpu/device.ts";
export { DeviceTensor } from "./tensor/device_tensor.ts";
export { disposeAll } from "./tensor/dispose.ts";
export { deleteDLPack, fromDLPack, releaseDLPack, toDLPack } from "./tensor/dlpack.ts";
export { type DType, DTYPES, type Float16ArrayLike, type StorageFor, type TypedArray } from "./tensor/dtype.ts";
export type { DataFor, HostArrayFor, NaturalDType } from "./tensor/dtype_arrays.ts";
export type { DTypeOf, HostLeafFor } from "./tensor/host_leaf.ts";
export { MtcError, Status, type StatusName } from "./base/errors.ts";
export { isPinnedHostOutput, releaseHostOutput } from "./tensor/host_output.ts";
export {
  cudaDeviceCount,
  cudaUnavailableReason,
  hasKernels,
  libraryVersion,
  poolStats,
  type PoolStats,
  setPinnedPoolLimit,
  trimPools,
  warmUp,
  type WarmUpOptions,
} from "./gpu/info.ts";
export { type CopyOptions, DEFAULT_OPTIONS } from "./copy/options.ts";
export { type DeviceToHostPath, type PlanStats } from "./copy/plan_stats.ts";
export { prefetch, type PrefetchOptions } from "./copy/prefetch.ts";
export { CudaEvent } from "./gpu/event.ts";
export { currentStream, Stream, withStream } from "./gpu/stream.ts";
export {
  type DevicePointer,
  Kernel,
  type KernelArg,
  type KernelParam,
  type LaunchOptions,
  Module,
  settleLaunches,
} from "./gpu/kernel.ts";
export { Tensor } from "./tensor/tensor.ts";
export type { TensorLayout } from "./tensor/strides.ts";
export { clearTransferStreams, type DeviceSpec, Identity, ToDevice, transferStream } from "./copy/to_device.ts";
export { Arena } from "./tensor/arena.ts";
export { type PinnedOptions, pinnedArray, pinnedTensor, setPinnedHeldLimit } from "./tensor/pinned.ts";
export { startArenaCopy } from "./copy/arena_copy.ts";
// Device strings read at run time, waits with a limit, what a host array comes back as.
export { checkDevice as parseDevice, isDevice } from "./gpu/device.ts";
export { type AbortSignalLike, type WaitOptions } from "./copy/wait_limit.ts";
export { type HostArrayOf } from "./copy/types.ts";
export {
  type BuiltinErrorName,
  dropMoved,
  disposeMoved,
  dropMovedFrom,
  isMoved,
  type LayoutShape,
  type Moved,
  type MovedError,
  movedError,
  moveResult,
  ownerAlive,
  takeResult,
  type TensorExtra,
  threadOwner,
} from "./thread/move.ts";
export { Loader, type LoaderContext, type LoaderOptions, startLoader } from "./thread/loader.ts";
export type { LoaderStats, LoaderWorkerStats } from "./thread/loader_stats.ts";
