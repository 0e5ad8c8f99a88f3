/**
 * The example batch of DESIGN.md (from the accvlab example), with seeded
 * random contents, for tests, examples and benchmarks.
 *
 * 16 samples: configs A, B, C, D repeated 4 times in that order (A, B, C, D,
 * A, B, ...). Each sample is `{ cams_gt: [6 cameras], gt_data }`:
 * - camera (n visible objects): bounding_boxes float32 [n, 4] (Tensor),
 *   class_ids int64 [n] (BigInt64Array), active bool [n] (Tensor over a
 *   Uint8Array), depths float32 [n] (Float32Array), proj_mat float32 [3, 4]
 *   (Tensor);
 * - gt_data (N objects): bounding_boxes_3d float32 [N, 7] (Tensor),
 *   class_ids int64 [N] (BigInt64Array), active bool [N] (Tensor).
 * 33 tensors a sample, 528 in all, 153,628 bytes.
 *
 * @example
 * ```ts
 * import { makeExampleBatch } from "./example_batch.ts";
 * const batch = makeExampleBatch(42);
 * const onGpu = await startCopy(batch, "cuda:0");
 * ```
 *
 * @module
 */

import { type Arena, DeviceTensor, Tensor, type TypedArray } from "../ts/mod.ts";

/** One config: N ground-truth objects, and visible objects per camera. */
export interface ExampleConfig {
  readonly name: string;
  readonly gtObjects: number;
  readonly visiblePerCamera: readonly number[];
}

/** The four configs of the example, in order. */
export const EXAMPLE_CONFIGS: readonly ExampleConfig[] = [
  { name: "A", gtObjects: 60, visiblePerCamera: [30, 20, 40, 10, 50, 20] },
  { name: "B", gtObjects: 100, visiblePerCamera: [60, 40, 30, 70, 20, 50] },
  { name: "C", gtObjects: 45, visiblePerCamera: [10, 20, 10, 30, 20, 10] },
  { name: "D", gtObjects: 120, visiblePerCamera: [80, 50, 60, 40, 70, 30] },
];

/** Tensors in one example batch. */
export const EXAMPLE_BATCH_TENSORS = 528;
/** Bytes of tensor data in one example batch. */
export const EXAMPLE_BATCH_BYTES = 153_628;

/** A camera's ground truth. */
export interface CameraGt {
  bounding_boxes: Tensor;
  class_ids: BigInt64Array;
  active: Tensor;
  depths: Float32Array;
  proj_mat: Tensor;
}

/** A sample's 3-D ground truth. */
export interface GtData {
  bounding_boxes_3d: Tensor;
  class_ids: BigInt64Array;
  active: Tensor;
}

/** One sample of the batch. */
export interface ExampleSample {
  cams_gt: CameraGt[];
  gt_data: GtData;
}

/** mulberry32: a small, fast, seeded generator of floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Where a batch's arrays are made: fresh ones, or the next ones of an arena. */
interface Arrays {
  float32(count: number): Float32Array;
  int64(count: number): BigInt64Array;
  uint8(count: number): Uint8Array;
}

const FRESH: Arrays = {
  float32: (count) => new Float32Array(count),
  int64: (count) => new BigInt64Array(count),
  uint8: (count) => new Uint8Array(count),
};

function inArena(arena: Arena): Arrays {
  return {
    float32: (count) => arena.array("float32", count),
    int64: (count) => arena.array("int64", count),
    uint8: (count) => arena.array("uint8", count),
  };
}

function floats(random: () => number, arrays: Arrays, count: number, scale: number): Float32Array {
  const out = arrays.float32(count);
  for (let i = 0; i < count; i++) out[i] = (random() - 0.25) * scale;
  return out;
}

function classIds(random: () => number, arrays: Arrays, count: number): BigInt64Array {
  const out = arrays.int64(count);
  // The same values as out[i] = BigInt(...), written as little-endian 32-bit
  // halves: a BigInt made per element cost most of the batch's build.
  const words = new Int32Array(out.buffer, out.byteOffset, count * 2);
  for (let i = 0; i < count; i++) {
    words[2 * i] = Math.floor(random() * 10);
    words[2 * i + 1] = 0;
  }
  return out;
}

function flags(random: () => number, arrays: Arrays, count: number): Tensor {
  const out = arrays.uint8(count);
  for (let i = 0; i < count; i++) out[i] = random() < 0.8 ? 1 : 0;
  return new Tensor(out, [count], "bool");
}

/**
 * Builds the 16-sample example batch with contents drawn from `seed` (the
 * same seed gives the same batch), in fresh arrays, or written into
 * `arena` (it needs 160 KiB free), whose copies then need no staging.
 */
export function makeExampleBatch(seed = 1, arena?: Arena): ExampleSample[] {
  const random = seededRandom(seed);
  const arrays = arena === undefined ? FRESH : inArena(arena);
  const batch: ExampleSample[] = [];
  for (let repeat = 0; repeat < 4; repeat++) {
    for (const config of EXAMPLE_CONFIGS) {
      const cams_gt = config.visiblePerCamera.map((n): CameraGt => ({
        bounding_boxes: new Tensor(floats(random, arrays, n * 4, 1000), [n, 4]),
        class_ids: classIds(random, arrays, n),
        active: flags(random, arrays, n),
        depths: floats(random, arrays, n, 80),
        proj_mat: new Tensor(floats(random, arrays, 12, 2000), [3, 4]),
      }));
      const N = config.gtObjects;
      batch.push({
        cams_gt,
        gt_data: {
          bounding_boxes_3d: new Tensor(floats(random, arrays, N * 7, 100), [N, 7]),
          class_ids: classIds(random, arrays, N),
          active: flags(random, arrays, N),
        },
      });
    }
  }
  return batch;
}

/**
 * A copy of an example batch in fresh arrays (or written into `arena`), the
 * same structure and bytes: what a loader that decodes each batch into new
 * memory does, without the cost of drawing random contents.
 */
export function copyExampleBatch(batch: ExampleSample[], arena?: Arena): ExampleSample[] {
  const arrays = arena === undefined ? FRESH : inArena(arena);
  const f32 = (src: Float32Array) => {
    const out = arrays.float32(src.length);
    out.set(src);
    return out;
  };
  const i64 = (src: BigInt64Array) => {
    const out = arrays.int64(src.length);
    out.set(src);
    return out;
  };
  const flag = (src: Tensor) => {
    const out = arrays.uint8(src.size);
    out.set(src.data as Uint8Array);
    return new Tensor(out, src.shape, "bool");
  };
  return batch.map((sample) => ({
    cams_gt: sample.cams_gt.map((cam) => ({
      bounding_boxes: new Tensor(f32(cam.bounding_boxes.data as Float32Array), cam.bounding_boxes.shape),
      class_ids: i64(cam.class_ids),
      active: flag(cam.active),
      depths: f32(cam.depths),
      proj_mat: new Tensor(f32(cam.proj_mat.data as Float32Array), cam.proj_mat.shape),
    })),
    gt_data: {
      bounding_boxes_3d: new Tensor(f32(sample.gt_data.bounding_boxes_3d.data as Float32Array), sample.gt_data.bounding_boxes_3d.shape),
      class_ids: i64(sample.gt_data.class_ids),
      active: flag(sample.gt_data.active),
    },
  }));
}

/** A tensor leaf found by {@link forEachLeaf}. */
export type AnyLeaf = TypedArray | Tensor | DeviceTensor;

/**
 * Calls `visit(leaf, path)` for every tensor leaf (typed array, Tensor,
 * DeviceTensor) under arrays, plain objects and Maps, depth first, in order.
 * Paths are written as MtcError writes them (`[3].cams_gt[2].depths`).
 */
export function forEachLeaf(data: unknown, visit: (leaf: AnyLeaf, path: string) => void, path = ""): void {
  if (data instanceof Tensor || data instanceof DeviceTensor) return visit(data, path);
  if (ArrayBuffer.isView(data)) {
    if (!(data instanceof DataView)) visit(data as TypedArray, path);
    return;
  }
  if (Array.isArray(data)) {
    data.forEach((v, i) => forEachLeaf(v, visit, `${path}[${i}]`));
  } else if (data instanceof Map) {
    for (const [k, v] of data) forEachLeaf(v, visit, `${path}[${JSON.stringify(k)}]`);
  } else if (typeof data === "object" && data !== null) {
    const proto = Object.getPrototypeOf(data);
    if (proto !== Object.prototype && proto !== null) return;
    for (const [k, v] of Object.entries(data)) forEachLeaf(v, visit, `${path}.${k}`);
  }
}

/** Bytes of a leaf's data. */
export function leafBytes(leaf: AnyLeaf): number {
  if (leaf instanceof Tensor || leaf instanceof DeviceTensor) return leaf.byteLength;
  return leaf.byteLength;
}
