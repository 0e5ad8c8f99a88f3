/**
 * Copies between two GPUs into existing memory, shared by
 * copy_into_peer.test.ts, its child (fixtures/peer_child.ts) and the GPU
 * suite: a batch of every dtype in odd shapes (packed) and one leaf past the
 * packing threshold (its own block), destinations of every kind on the
 * target, and one copy checked byte for byte.
 *
 * @module
 */

import { copyInto, DeviceTensor, type DType, fromDLPack, startCopy, type Tensor, toDLPack, type TypedArray } from "../../ts/mod.ts";
import { assertEquals } from "./harness.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";

type HostLeaf = TypedArray | Tensor;
export type Batch = Record<string, HostLeaf>;

/** Leaves of the batch that get a block of their own (past the packing threshold): one peer copy each on every path. */
export const OWN_LEAVES = 1;

interface LeafSpec {
  readonly dtype: DType;
  readonly shape: number[];
}

/** Every dtype, 1-D of an odd length and 2-D [3, odd], and 300 KiB + 4 bytes of float32. */
function specs(): Record<string, LeafSpec> {
  const out: Record<string, LeafSpec> = {};
  for (const [i, dtype] of DTYPES.entries()) {
    out[`${dtype}_v`] = { dtype, shape: [1 + 2 * i] };
    out[`${dtype}_m`] = { dtype, shape: [3, 5 + 2 * i] };
  }
  out.large = { dtype: "float32", shape: [300 * 256 + 1] };
  return out;
}

export function peerBatch(seed: number): Batch {
  const batch: Batch = {};
  let k = 0;
  for (const [key, { dtype, shape }] of Object.entries(specs())) batch[key] = randomLeaf(dtype, shape, seed + k++);
  return batch;
}

export function leafCount(batch: Batch): number {
  return Object.keys(batch).length;
}

/**
 * Where a copy may land on `device`:
 *  - "views": views into one block (startCopy of zeros, packed)
 *  - "empty", "zeros": DeviceTensor.empty / zeros, a block each
 *  - "dlpack": zeros exported and imported again through DLPack: memory
 *    libmtc knows no block of (as another library's would be)
 */
export type DestinationKind = "views" | "empty" | "zeros" | "dlpack";
export const DESTINATION_KINDS: readonly DestinationKind[] = ["views", "empty", "zeros", "dlpack"];

export async function destinations(device: "cuda:0" | "cuda:1", kind: DestinationKind): Promise<Record<string, DeviceTensor>> {
  const all = specs();
  if (kind === "views") {
    const other: Batch = {}; // contents the copy must overwrite
    for (const [key, { dtype, shape }] of Object.entries(all)) other[key] = randomLeaf(dtype, shape, 7);
    return await startCopy(other, device) as unknown as Record<string, DeviceTensor>;
  }
  const out: Record<string, DeviceTensor> = {};
  for (const [key, { dtype, shape }] of Object.entries(all)) {
    const made = kind === "empty" ? DeviceTensor.empty(shape, dtype, device) : DeviceTensor.zeros(shape, dtype, device);
    if (kind !== "dlpack") {
      out[key] = made;
      continue;
    }
    const imported = fromDLPack(toDLPack(made)) as DeviceTensor;
    made.dispose(); // the export holds the block now
    out[key] = imported;
  }
  return out;
}

/** copyInto(source, buffers), awaited; every buffer then holds `expected`'s bytes. Returns the copy's copiesIssued. */
export async function copyAcross(source: unknown, buffers: Record<string, DeviceTensor>, expected: Batch): Promise<number> {
  const handle = copyInto(source, buffers);
  await handle;
  const issued = handle.stats().copiesIssued;
  handle.dispose();
  for (const [key, leaf] of Object.entries(expected)) assertEquals(bytesOf(buffers[key]!.toHost()), bytesOf(leaf), key);
  return issued;
}

