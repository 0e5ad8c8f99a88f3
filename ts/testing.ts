/**
 * Test helpers over libmtc's debug kernels: work queued on a stream that
 * takes a known time and writes known bytes, to check stream ordering.
 * Not part of the public entry (ts/mod.ts); import this file directly.
 *
 * Both need a libmtc built with its kernels (`hasKernels()`); without them
 * they throw MtcError with MTC_ERR_UNSUPPORTED.
 *
 * @example
 * ```ts
 * import { debugFill } from "./ts/testing.ts";
 * const stream = Stream.create("cuda:0");
 * debugFill(stream, onGpu, 0x7f, { spinMicroseconds: 50_000 }); // 50 ms, then fill
 * const back = withStream(stream, () => startCopy(onGpu, "cpu").get()); // sees 0x7f
 * ```
 *
 * @module
 */

import { DeviceTensor, isDeviceTensor, notADeviceTensor, tensorAddress, tensorBytes, tensorDisposed } from "./tensor/device_tensor.ts";
import { invalidArgument, invalidState, MtcError, Status, statusName } from "./base/errors.ts";
import { library, requireSymbol } from "./ffi/library.ts";
import type { Stream } from "./gpu/stream.ts";

export { hasKernels } from "./gpu/info.ts";

/** A device range: a DeviceTensor (all its bytes), or a raw address with a byte count. */
export type DeviceRange = DeviceTensor | { address: number; bytes: number };

function range(target: DeviceRange, what: string): { address: number; bytes: number } {
  if (target instanceof DeviceTensor) {
    if (!isDeviceTensor(target)) throw notADeviceTensor(undefined, `${what}: the range is `);
    if (tensorDisposed(target)) throw invalidState(`${what}: the DeviceTensor was disposed`);
    return { address: tensorAddress(target), bytes: tensorBytes(target) };
  }
  if (!Number.isSafeInteger(target.address) || !Number.isSafeInteger(target.bytes) || target.bytes < 0) {
    throw invalidArgument(`${what}: invalid device range`);
  }
  return target;
}

function check(status: number): void {
  if (status !== Status.MTC_OK) throw new MtcError(status, library().symbols.mtc_last_error() || statusName(status));
}

/**
 * Queues a kernel on `stream` that spins for `spinMicroseconds` (default 0),
 * then sets every byte of `target` to `value` (0..255). Returns at once.
 */
export function debugFill(stream: Stream, target: DeviceRange, value: number, options: { spinMicroseconds?: number } = {}): void {
  stream.checkLive();
  const { address, bytes } = range(target, "debugFill");
  const spin = options.spinMicroseconds ?? 0;
  if (!Number.isInteger(value) || value < 0 || value > 255) throw invalidArgument(`debugFill: value ${value} is not a byte`);
  if (!Number.isInteger(spin) || spin < 0 || spin > 0xffffffff) throw invalidArgument(`debugFill: bad spinMicroseconds ${spin}`);
  const fill = requireSymbol("mtc_debug_fill", "debug kernels");
  check(fill(stream.deviceIndex, stream.handle, address, bytes, value, spin));
}

/**
 * Queues a kernel on `stream` that copies `source` into `destination` (the
 * smaller of the two byte counts). A kernel reads the data, unlike a DMA:
 * it shows whether work queued on a stream after a copy sees the copy.
 */
export function debugCopy(stream: Stream, destination: DeviceRange, source: DeviceRange): void {
  stream.checkLive();
  const dst = range(destination, "debugCopy");
  const src = range(source, "debugCopy");
  const copy = requireSymbol("mtc_debug_copy", "debug kernels");
  check(copy(stream.deviceIndex, stream.handle, dst.address, src.address, Math.min(dst.bytes, src.bytes)));
}
