// Traversal: output shapes, pass-through identity, reuse on the host, paths
// and errors. Copies to "cpu" of host data need no library.
import { DeviceTensor, MtcError, startCopy, Tensor } from "../../ts/mod.ts";
import { formatPath, leafPath, traverse } from "../../ts/copy/walk.ts";
import { makeDeviceTensor } from "../../ts/tensor/device_tensor.ts";
import { EXAMPLE_BATCH_BYTES, EXAMPLE_BATCH_TENSORS, forEachLeaf, leafBytes, makeExampleBatch } from "../../examples/example_batch.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

class Point {
  constructor(public x: number, public y: number) {}
}

test("traverse: arrays, objects and Maps are mirrored with new containers", () => {
  const leafA = new Float32Array([1, 2]);
  const leafB = new Tensor(new Int32Array(6), [2, 3]);
  const inner = new Map<unknown, unknown>([["k", leafA], [7, [leafB]]]);
  const data = { list: [leafA, { deep: inner }], map: inner, n: 1 };
  const out = startCopy(data, "cpu").get();
  assert(out !== data && out.list !== data.list && out.map !== data.map);
  assert(out.map instanceof Map && out.map !== inner);
  assertEquals(out, data);
  assertEquals([...out.map.keys()], ["k", 7]);
  assertSame(out.list[0], leafA, "host leaves bound for the host are the same objects");
  assertSame(out.map.get("k"), leafA);
  assertSame((out.map.get(7) as unknown[])[0], leafB);
});

test("traverse: key order is kept, whatever comes first", () => {
  const data = { z: 1, a: new Float32Array(1), m: "x", b: new Uint8Array(1) };
  assertEquals(Object.keys(traverse(data, 0).root[0] as object), ["z", "a", "m", "b"]);
  const map = new Map<string, unknown>([["z", new Uint8Array(1)], ["a", 1]]);
  assertEquals([...(traverse(map, 0).root[0] as Map<string, unknown>).keys()], ["z", "a"]);
});

test("traverse: non-tensors pass through by identity", () => {
  const point = new Point(1, 2);
  const view = new DataView(new ArrayBuffer(8));
  const set = new Set([new Float32Array(1)]);
  const fn = () => 1;
  const date = new Date(0);
  const buffer = new ArrayBuffer(4);
  const sym = Symbol("s");
  const data = [1, "s", null, undefined, true, 5n, sym, point, view, set, fn, date, buffer];
  const t = traverse(data, 0);
  assertSame(t.count, 0, "none of these is copied, not even the typed array inside the Set");
  const out = t.root[0] as unknown[];
  assert(out !== data);
  data.forEach((v, i) => assertSame(out[i], v, `item ${i}`));
  // A root that is not a container passes through too.
  assertSame(startCopy(point, "cpu").get(), point);
  assertSame(startCopy(42, "cuda:0").get(), 42, "nothing to copy: no device needed");
});

test("traverse: null-prototype objects are containers, the output has plain objects", () => {
  const data = Object.assign(Object.create(null) as Record<string, unknown>, { a: new Float32Array(2) });
  const out = startCopy(data, "cpu").get() as Record<string, unknown>;
  assertSame(Object.getPrototypeOf(out), Object.prototype);
  assertSame(out.a, data.a);
});

test("traverse: an own __proto__ key stays a key", () => {
  const data = JSON.parse('{"__proto__": {"x": 1}, "b": 2}') as Record<string, unknown>;
  const out = startCopy(data, "cpu").get() as Record<string, unknown>;
  assertSame(Object.getPrototypeOf(out), Object.prototype);
  assertEquals(Object.keys(out), ["__proto__", "b"]);
});

test("traverse: a root leaf is copied and placed at the root", () => {
  const leaf = new Float64Array(3);
  const t = traverse(leaf, 0);
  assertSame(t.count, 1);
  assertSame(leafPath(t, 0), "");
  assertSame(startCopy(leaf, "cpu").get(), leaf);
});

test("traverse: leaves are listed in depth-first order with their paths", () => {
  const batch = makeExampleBatch(3);
  const t = traverse(batch, 0);
  const expected: string[] = [];
  forEachLeaf(batch, (_leaf, path) => expected.push(path));
  assertSame(t.count, EXAMPLE_BATCH_TENSORS);
  assertEquals(Array.from({ length: t.count }, (_, i) => leafPath(t, i)), expected);
  assertSame(leafPath(t, 3), "[0].cams_gt[0].depths");
});

test("traverse: path format", () => {
  const root = { parent: null, key: 0, kind: 1 as const };
  assertSame(formatPath(null), "");
  assertSame(formatPath(root, "a"), ".a");
  assertSame(formatPath(root, "odd key"), '["odd key"]');
  assertSame(formatPath(root, "1abc"), '["1abc"]');
  const arr = { parent: root, key: "list", kind: 0 as const };
  assertSame(formatPath(arr, 3), ".list[3]");
  const map = { parent: arr, key: 2, kind: 2 as const };
  assertSame(formatPath(map, "cam"), '.list[2]["cam"]');
  assertSame(formatPath(map, 7), ".list[2][7]");
  assertSame(formatPath(map, 7n), ".list[2][7n]");
  assertSame(formatPath(map, null), ".list[2][null]");
  assertSame(formatPath(map, NaN), ".list[2][NaN]");
});

test("traverse: the example batch is mirrored exactly", () => {
  const batch = makeExampleBatch(7);
  const out = startCopy(batch, "cpu").get();
  assertEquals(out, batch);
  assert(out !== batch && out[5] !== batch[5] && out[5]!.cams_gt !== batch[5]!.cams_gt);
  assertSame(out[5]!.cams_gt[2]!.depths, batch[5]!.cams_gt[2]!.depths);
});

test("example batch: 16 samples, 528 tensors, 153,628 bytes", () => {
  const batch = makeExampleBatch();
  assertSame(batch.length, 16);
  let count = 0;
  let bytes = 0;
  forEachLeaf(batch, (leaf) => {
    count++;
    bytes += leafBytes(leaf);
  });
  assertSame(count, EXAMPLE_BATCH_TENSORS);
  assertSame(bytes, EXAMPLE_BATCH_BYTES);
  // Configs A, B, C, D in order, 4 times.
  assertEquals(batch.map((s) => s.gt_data.class_ids.length), [60, 100, 45, 120, 60, 100, 45, 120, 60, 100, 45, 120, 60, 100, 45, 120]);
  assertEquals(batch[1]!.cams_gt.map((c) => c.depths.length), [60, 40, 30, 70, 20, 50]);
  const cam = batch[0]!.cams_gt[0]!;
  assertEquals(cam.bounding_boxes.shape, [30, 4]);
  assertSame(cam.active.dtype, "bool");
  assertEquals(cam.proj_mat.shape, [3, 4]);
  assertEquals(batch[0]!.gt_data.bounding_boxes_3d.shape, [60, 7]);
  // Seeded: same seed, same contents; contents are not all zero.
  assertEquals(makeExampleBatch(5), makeExampleBatch(5));
  assert(cam.depths.some((v) => v !== 0));
});

test("traverse: a cycle is an error with its path, not a hang", () => {
  const a: Record<string, unknown> = { x: new Float32Array(1) };
  a.self = a;
  const e = assertThrows(() => startCopy([a], "cpu"), MtcError, "[0].self: cycle");
  assertSame(e.path, "[0].self");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  assert(e.message.includes("it is also at [0]"));
  const list: unknown[] = [];
  list.push(new Map([["again", list]]));
  assertThrows(() => traverse(list, 0), MtcError, '[0]["again"]: cycle: this container contains itself (it is also at (root))');
});

test("traverse: a shared sub-object is visited twice, not a cycle", () => {
  const shared = { v: new Float32Array([1]) };
  const data = { a: shared, b: shared, c: [shared, shared] };
  const t = traverse(data, 0);
  assertSame(t.count, 4);
  const out = startCopy(data, "cpu").get();
  assert(out.a !== out.b, "each visit makes its own output container");
  assertEquals(out, data);
});

test("traverse: 10,000-deep nesting works", () => {
  const depth = 10_000;
  const leaf = new Uint8Array([1, 2, 3]);
  let data: unknown = leaf;
  for (let i = 0; i < depth; i++) data = i % 3 === 0 ? [data] : i % 3 === 1 ? { d: data } : new Map([[0, data]]);
  const t = traverse(data, 0);
  assertSame(t.count, 1);
  assert(leafPath(t, 0).length > depth * 2);
  let out = startCopy(data, "cpu").get() as unknown;
  for (let i = depth - 1; i >= 0; i--) {
    out = i % 3 === 0 ? (out as unknown[])[0] : i % 3 === 1 ? (out as { d: unknown }).d : (out as Map<number, unknown>).get(0);
  }
  assertSame(out, leaf);
  // A 10,000-deep cycle is found too.
  const top: unknown[] = [];
  let cur = top;
  for (let i = 0; i < depth; i++) {
    const next: unknown[] = [];
    cur.push(next);
    cur = next;
  }
  cur.push(top);
  const e = assertThrows(() => traverse(top, 0), MtcError, "cycle");
  assertSame(e.path, "[0]".repeat(depth + 1));
});

test("traverse: a disposed DeviceTensor is an error naming its path", () => {
  const dead = makeDeviceTensor(0, [0], "float32", 0, 0, 0, 0, false, null);
  dead.dispose();
  assert(dead.disposed);
  const e = assertThrows(() => startCopy({ cams: [1, { depths: dead }] }, "cpu"), MtcError, ".cams[1].depths: this DeviceTensor was disposed");
  assertSame(e.path, ".cams[1].depths");
  assertThrows(() => startCopy(dead, "cuda:0"), MtcError, "(root): this DeviceTensor was disposed");
});

test("traverse: DeviceTensors already on the target are reused, others are listed", () => {
  const onZero = makeDeviceTensor(4096, [4], "float32", 0, 16, 0, 0, false, null);
  const t0 = traverse({ a: onZero }, 0);
  assertSame(t0.count, 0);
  assertSame((t0.root[0] as { a: unknown }).a, onZero);
  assertSame(traverse({ a: onZero }, 1).count, 1);
  assertSame(traverse({ a: onZero }, -1).count, 1);
  assertSame(startCopy({ a: onZero }, "cuda:0").get().a, onZero);
});
