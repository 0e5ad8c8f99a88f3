/**
 * disposeAll: dispose every DeviceTensor, and release every pinned host
 * output, in a nested batch.
 *
 * @module
 */

import { type CopyMark, otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { DeviceTensor, isDeviceTensor, tensorDisposed } from "./device_tensor.ts";
import { releaseHostImport } from "./dlpack.ts";
import { releasePinned } from "./host_output.ts";
import { Tensor } from "./tensor.ts";

/**
 * Disposes every {@link DeviceTensor} found in `data` (itself, or inside
 * arrays, plain objects and Maps, walked without recursion, each container
 * once), and releases the pinned block under every host output of a copy to
 * "cpu" found there (as `releaseHostOutput` does: every view of such a
 * block becomes empty), and every host tensor imported with `fromDLPack` (as
 * `releaseDLPack` does). Returns how many DeviceTensors it disposed plus how
 * many pinned blocks and host imports it released now (already-disposed
 * ones, other arrays and everything else are left alone). A tensor of
 * another copy of the library (another version, or a second copy that did
 * not adopt this one) holds nothing this copy can give back: once the rest
 * is disposed, an MtcError names the first one found.
 *
 * @example
 * ```ts
 * const onGpu = await startCopy(batch, "cuda:0");
 * // ... use it ...
 * disposeAll(onGpu);
 * ```
 */
export function disposeAll(data: unknown): number {
  let disposed = 0;
  let other: CopyMark | undefined;
  const seen = new Set<object>();
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null) continue;
    if (value instanceof DeviceTensor) {
      // One that is not ours (no private state) holds nothing to give back: left alone.
      if (isDeviceTensor(value) && !tensorDisposed(value)) {
        value.dispose();
        disposed++;
      }
      continue;
    }
    if (value instanceof Tensor || ArrayBuffer.isView(value)) {
      if (releasePinned(value) || releaseHostImport(value)) disposed++;
      continue;
    }
    if (seen.has(value)) continue;
    if (Array.isArray(value)) {
      seen.add(value);
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
    } else if (value instanceof Map) {
      seen.add(value);
      for (const v of value.values()) stack.push(v);
    } else {
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        other ??= otherCopyMark(value);
        continue;
      }
      seen.add(value);
      for (const key of Object.keys(value)) stack.push((value as Record<string, unknown>)[key]);
    }
  }
  if (other !== undefined) throw otherCopyError(other, undefined, "disposeAll: ");
  return disposed;
}
