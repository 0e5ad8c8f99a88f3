// The producer of tests/package/loader_smoke.ts, run by the loader's workers:
// it imports the package by name (or, as a second install, by path: see
// install_test.sh) and makes six batches with every kind of leaf, each
// filled with values that name the batch and the leaf (storedValues).
// Arena and pinned leaves are the package's own pinned memory: the copy
// reads them where they lie, so the arena's two tensors land in one device
// block at the distance they have in the arena, the gap between them
// included (a staged copy packs them next to each other).
import { Arena, pinnedTensor, Tensor } from "multi-tensor-copier";

/** The leaves of every batch, in the order they are filled. */
export const LEAVES = ["tensor", "array", "arenaTensor", "arenaArray", "pinned", "strided", "complex"] as const;

/** What the producer writes into leaf `name` of batch `index` (for a strided leaf, into its storage). */
export function storedValues(index: number, name: (typeof LEAVES)[number]): number[] {
  const count = { tensor: 6, array: 5, arenaTensor: 6, arenaArray: 5, pinned: 4, strided: 6, complex: 4 }[name];
  return Array.from({ length: count }, (_, i) => index * 100 + LEAVES.indexOf(name) * 10 + i);
}

/**
 * What the copy of leaf `name` of batch `index` holds, dense. The strided
 * leaf is the transpose [3, 2] of a [2, 3] storage s: its element [i][j] is
 * s[i + 3 * j].
 */
export function expectedValues(index: number, name: (typeof LEAVES)[number]): number[] {
  const stored = storedValues(index, name);
  return name === "strided" ? [0, 3, 1, 4, 2, 5].map((k) => stored[k]!) : stored;
}

let arena: Arena | undefined;
let pinned: Tensor | undefined;

export default async function batch(index: number): Promise<Record<string, unknown> | undefined> {
  if (index >= 6) return undefined;
  // The copy of this worker's last batch is over (the worker waited for it before it moved it).
  arena ??= Arena.create(1 << 16);
  await arena.reset();
  pinned ??= pinnedTensor("float64", [4]);
  const arenaTensor = arena.tensor("float32", [2, 3]);
  arena.array("uint8", 64); // a gap: read in place, the two land this far apart on the device too
  const arenaArray = arena.array("int32", 5);
  (arenaTensor.data as Float32Array).set(storedValues(index, "arenaTensor"));
  arenaArray.set(storedValues(index, "arenaArray"));
  (pinned.data as Float64Array).set(storedValues(index, "pinned"));
  return {
    index,
    tensor: new Tensor(new Float32Array(storedValues(index, "tensor")), [2, 3]),
    array: new Int32Array(storedValues(index, "array")),
    arenaTensor,
    arenaArray,
    arenaDistance: arena.offsetOf(arenaArray)! - arena.offsetOf(arenaTensor.data)!,
    pinned,
    strided: new Tensor(new Float32Array(storedValues(index, "strided")), [3, 2], "float32", { strides: [1, 3] }),
    complex: new Tensor(new Float32Array(storedValues(index, "complex")), [2], "complex64"),
  };
}
