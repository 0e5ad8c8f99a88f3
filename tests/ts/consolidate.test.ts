// Arena#consolidate: the mirror it returns (every container kind, holes,
// own "__proto__" keys, shared containers, what it keeps as it is), every
// dtype byte for byte at its place in the arena, sources of another kind
// than their copy, each input read once, views that grow or shrink while
// the batch is read, cycles at any depth, and an arena that the caller's
// getters use while the batch is read. Emulated driver (arenas are pinned).
import { Arena, DeviceTensor, MtcError, Tensor, type TypedArray } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";

const arenaTest = (name: string, fn: () => void) => test(`consolidate: ${name}`, fn, { skip: skipWithoutDriver });

/** True when `leaf` (a Tensor or typed array) lies in `arena`'s current batch. */
function inArena(arena: Arena, leaf: unknown): boolean {
  const data = leaf instanceof Tensor ? leaf.data : leaf;
  return ArrayBuffer.isView(data) && arena.offsetOf(data) !== undefined;
}

arenaTest("mirrors arrays (holes too), Maps, plain and bare objects with an own __proto__ key; keeps the rest as it is", () => {
  using arena = Arena.create(1 << 16);
  using live = DeviceTensor.zeros([2], "float32", "cuda:0");
  class Note {}
  const note = new Note();
  const shared = { s: new Int16Array([1, 2]) };
  const bare = Object.create(null) as Record<string, unknown>;
  bare.b = new Float64Array([0.5]);
  const own = JSON.parse('{"__proto__": 1, "z": 2}') as Record<string, unknown>; // an own "__proto__" key
  Object.defineProperty(own, "__proto__", { value: new Uint8Array([9]), enumerable: true, writable: true, configurable: true });
  // deno-lint-ignore no-sparse-arrays
  const batch = { list: [1, , new Int32Array([3]), null, "s"], map: new Map<unknown, unknown>([["k", new Uint32Array([4])], [7, { x: shared }]]), bare, own, shared, note, live };
  const out = arena.consolidate(batch);
  assertSame(out.list.length, 5);
  assert(!(1 in out.list), "a hole stays a hole");
  assertEquals([out.list[0], out.list[3], out.list[4]], [1, null, "s"]);
  assert(out.list[2] instanceof Int32Array && inArena(arena, out.list[2]) && out.list[2][0] === 3, "the Int32Array, in the arena");
  assertEquals([...out.map.keys()], ["k", 7]);
  assert(inArena(arena, out.map.get("k")), "a Map's leaf");
  assertSame(Object.getPrototypeOf(out.bare), Object.prototype);
  assert(inArena(arena, out.bare.b), "a bare object's leaf");
  assertEquals(Object.keys(out.own), ["__proto__", "z"]);
  assertSame(Object.getPrototypeOf(out.own), Object.prototype, "__proto__ stays a key");
  assert(inArena(arena, Object.getOwnPropertyDescriptor(out.own, "__proto__")!.value), "the leaf under __proto__");
  // A container met twice (no cycle) is mirrored twice, its leaves copied twice.
  const twice = (out.map.get(7) as { x: typeof shared }).x;
  assert(twice !== out.shared && twice.s !== out.shared.s && inArena(arena, twice.s) && inArena(arena, out.shared.s), "two copies");
  assertSame(out.note, note, "a class instance is kept");
  assertSame(out.live, live, "a DeviceTensor is kept");
  assertSame(arena.consolidate(5), 5);
  const alone = arena.consolidate(new Uint16Array([5, 6]));
  assert(alone instanceof Uint16Array && inArena(arena, alone) && alone[1] === 6, "a batch that is one leaf");
});

arenaTest("every dtype, as Tensor and bare array, byte for byte, one after another at multiples of 16", () => {
  using arena = Arena.create(1 << 20);
  arena.array("uint8", 5); // taken before: the batch starts at the next multiple of 16
  const batch: Record<string, TypedArray | Tensor> = {};
  DTYPES.forEach((dtype, k) => {
    batch[`${dtype}2d`] = randomLeaf(dtype, [3, 1 + (k % 5)], 10 + k);
    batch[`${dtype}1d`] = randomLeaf(dtype, [1 + ((k * 7) % 13)], 40 + k);
  });
  const out = arena.consolidate(batch);
  let end = 5;
  for (const key of Object.keys(batch)) {
    const leaf = batch[key]!, copy = out[key]!;
    const data = copy instanceof Tensor ? copy.data : copy;
    assertSame(copy instanceof Tensor, leaf instanceof Tensor, key);
    if (leaf instanceof Tensor) assertEquals([(copy as Tensor).dtype, (copy as Tensor).shape], [leaf.dtype, leaf.shape], key);
    else assertSame(Object.getPrototypeOf(copy), Object.getPrototypeOf(leaf), key);
    assertEquals(bytesOf(copy), bytesOf(leaf), key);
    const at = arena.offsetOf(data)!;
    assertSame(at, Math.ceil(end / 16) * 16, `${key} follows the leaf before`);
    end = at + data.byteLength;
  }
  assertSame(arena.used, end);
});

arenaTest("a source of another kind than its copy is copied byte for byte, never converted", () => {
  using arena = Arena.create(1 << 16);
  // float16 bits whose values Float16Array would change (NaN payloads), and a bool over a Uint8ClampedArray.
  const half = new Tensor(new Uint16Array([0x7e01, 0xfc02, 0x3c00, 0x7c01]), [2, 2], "float16");
  const flags = new Tensor(new Uint8ClampedArray([0, 1, 1, 0]), [4], "bool");
  const clamped = new Uint8ClampedArray([255, 7]);
  const out = arena.consolidate({ half, flags, clamped });
  assertEquals(bytesOf(out.half), bytesOf(half));
  assertEquals(bytesOf(out.flags), bytesOf(flags));
  assert(out.clamped instanceof Uint8Array, "a Uint8ClampedArray comes back as the uint8 it is");
  assertEquals(Array.from(out.clamped), [255, 7]);
  // An array whose own constructor names another kind: its bytes are no whole number of that kind's elements.
  const liar = new Uint8Array(3);
  Object.defineProperty(liar, "constructor", { value: Float32Array });
  const used = arena.used;
  const e = assertThrows(() => arena.consolidate({ ok: new Int8Array(2), odd: [liar] }), MtcError, "Arena.consolidate: batch.odd[0]: its 3 bytes are no whole number of float32 elements");
  assertSame(e.path, ".odd[0]");
  assertSame(arena.used, used, "nothing taken");
});

arenaTest("each input is read once: getters, Proxies", () => {
  using arena = Arena.create(1 << 16);
  const reads: string[] = [];
  const tensor = new Tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
  const batch = new Proxy({ a: new Int32Array([1]), get t() { reads.push("t"); return tensor; } }, {
    get(target, key, receiver) {
      reads.push(`get ${String(key)}`);
      return Reflect.get(target, key, receiver);
    },
  });
  const out = arena.consolidate(batch);
  assertEquals(reads, ["get a", "get t", "t"]);
  assertEquals(Array.from((out.t as Tensor).data as Float32Array), [1, 2, 3, 4]);
});

arenaTest("a view of a resizable buffer that grows while the batch is read is copied as read; one that shrinks is refused with its path", () => {
  using arena = Arena.create(1 << 16);
  const buffer = new ArrayBuffer(8, { maxByteLength: 64 });
  const view = new Uint8Array(buffer); // tracks the buffer's length
  view.set([1, 2, 3, 4, 5, 6, 7, 8]);
  const grows = { a: view, get b() { buffer.resize(16); return new Uint8Array(1); } };
  const out = arena.consolidate(grows);
  assertEquals(Array.from(out.a), [1, 2, 3, 4, 5, 6, 7, 8]);
  const used = arena.used;
  const shrinks = { x: [view], get y() { buffer.resize(4); return 0; } };
  const e = assertThrows(() => arena.consolidate(shrinks), MtcError, "batch.x[0]: its buffer was detached or shrunk while the batch was read");
  assertSame(e.path, ".x[0]");
  assertSame(arena.used, used, "nothing taken");
});

arenaTest("a cycle is refused with its path, near the root and deeper than 16 containers; a container met twice on no path is none", () => {
  using arena = Arena.create(1 << 16);
  const near: Record<string, unknown> = { a: new Uint8Array(1) };
  near.self = [near];
  assertThrows(() => arena.consolidate({ near }), MtcError, "Arena.consolidate: batch.near.self[0]: the batch contains itself (a cycle)");
  const chain: Record<string, unknown>[] = [{}]; // chain[d]: the object at depth d
  for (let depth = 1; depth <= 24; depth++) chain.push((chain[depth - 1]!.next = {}) as Record<string, unknown>);
  const leaf = { v: new Float32Array([1]) };
  chain[24]!.twice = [leaf, leaf]; // deeper than 16: met twice, on no path
  const out = arena.consolidate(chain[0]!);
  let mirrored = out as Record<string, unknown>;
  for (let depth = 0; depth < 24; depth++) mirrored = mirrored.next as Record<string, unknown>;
  const [first, second] = mirrored.twice as { v: Float32Array }[];
  assert(first !== second && inArena(arena, first!.v) && inArena(arena, second!.v), "both copied");
  chain[24]!.back = { up: chain[20] }; // a cycle only the deep containers' set sees
  const e = assertThrows(() => arena.consolidate(chain[0]!), MtcError, "the batch contains itself (a cycle)");
  assertSame(e.path, `${".next".repeat(24)}.back.up`);
});

arenaTest("a getter that uses the arena while the batch is read: what it took stays its own; a disposed arena is refused", () => {
  const arena = Arena.create(1 << 16);
  let taken: Float32Array | undefined;
  const out = arena.consolidate({ a: new Float32Array([1, 2]), get b() { taken = arena.array("float32", 4); taken.fill(9); return new Float32Array([3]); } });
  assertEquals(Array.from(taken!), [9, 9, 9, 9], "its array is not written by the copy");
  assertEquals([Array.from(out.a), Array.from(out.b)], [[1, 2], [3]]);
  assert(arena.offsetOf(out.a)! >= arena.offsetOf(taken!)! + 16, "the copies come after it");
  const gone = { a: new Float32Array(2), get b() { arena.dispose(); return 1; } };
  assertThrows(() => arena.consolidate(gone), MtcError, "Arena.consolidate: the arena was disposed");
  // What consolidate takes its bytes with: never past the end, never back below what was taken.
  using small = Arena.create(64);
  small.array("uint8", 8);
  for (const end of [65, 4, 0.5]) assertThrows(() => small.takeUpTo("take", end), MtcError, `take: the arena's bytes up to ${end} cannot be taken (8 of 64 bytes used)`);
  assertSame(small.used, 8);
});
