// A moved result's message is untrusted input: edited rows (offsets, shapes,
// dtypes, block indices, kinds, devices, lengths), messages kept from
// another process or with ids of another key, a thread owner's id given as
// a parcel, messages taken twice: each refused with an MtcError, nothing
// taken, nothing freed; "__proto__" keys round-trip as own keys; a pinned
// leaf moved twice is refused. Emulated driver.
import {
  DeviceTensor,
  disposeAll,
  dropMoved,
  dropMovedFrom,
  type Moved,
  MtcError,
  moveResult,
  ownerAlive,
  pinnedArray,
  pinnedTensor,
  startCopy,
  takeResult,
  Tensor,
  threadOwner,
} from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { encodeOptions, OPTIONS_SIZE, resolveOptions } from "../../ts/copy/options.ts";
import { F, FIELDS } from "../../ts/thread/message.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { runScript } from "./fixtures/spawn.ts";

const moveTest = (name: string, fn: () => void | Promise<void>) => test(`move, untrusted: ${name}`, fn, { skip: skipWithoutDriver });

const sym = () => library().symbols;
/** What a refused message must leave as it was: the parcels not taken, and what this thread's owner holds. */
const held = () => ({ parcels: sym().mtc_parcels_live!(), refs: sym().mtc_owner_ref_count!(threadOwner()) });

/** `fn` throws MtcError with `code`, whose message includes `includes` (and whose path is `path`), and takes nothing. */
function refused(fn: () => unknown, code: string, includes: string, path?: string): MtcError {
  const before = held();
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.code, code, e.message);
  if (path !== undefined) assertSame(e.path, path, e.message);
  assertEquals(held(), before, `nothing taken or released: ${e.message}`);
  return e;
}

/** A result of every kind of leaf: two DeviceTensors (a block each, of their bytes), a pinned array, a pinned Tensor, a pageable Tensor. */
async function mixed() {
  const batch = { a: new Float32Array([1, 2, 3, 4]), b: new Tensor(new Int32Array([1, 2, 3, 4, 5, 6]), [2, 3]) };
  const onGpu = await startCopy(batch, "cuda:0", { packCpuTensors: false });
  const p = pinnedArray("float64", 8).fill(5);
  const t = pinnedTensor("float32", [2, 3]);
  (t.data as Float32Array).set([1, 2, 3, 4, 5, 6]);
  return { a: onGpu.a, deep: [{ b: onGpu.b }], p, t, s: new Tensor(new Uint8Array([9, 8]), [2]) };
}

type Mixed = Awaited<ReturnType<typeof mixed>>;

function checkMixed(got: Mixed): void {
  assertEquals(Array.from(got.a.toHost() as Float32Array), [1, 2, 3, 4]);
  assertEquals(Array.from((got.deep[0]!.b.toHost() as Tensor).data as Int32Array), [1, 2, 3, 4, 5, 6]);
  assertEquals(Array.from(got.p), [5, 5, 5, 5, 5, 5, 5, 5]);
  assertEquals(Array.from(got.t.data as Float32Array), [1, 2, 3, 4, 5, 6]);
  assertEquals(Array.from(got.s.data as Uint8Array), [9, 8]);
}

/** A copy of `m` with leaf `leaf`'s field `field` set to `value`, and extents of `dims` set as `extents` says ([index, value] pairs). */
function edited(m: Moved, leaf: number, field: keyof typeof F, value: number, extents: [number, number][] = []): Moved {
  const copy = structuredClone(m) as { nums: Float64Array; dims: Float64Array };
  copy.nums[leaf * FIELDS + F[field]] = value;
  for (const [at, extent] of extents) copy.dims[at] = extent;
  return copy as unknown as Moved;
}

// The walk's order: a, p, t, s (the root's leaves), then deep[0].b.
const A = 0, P = 1, T = 2, B = 4;

moveTest("edited rows are refused, naming the leaf; the message as sent is still taken, exact", async () => {
  const m = moveResult(await mixed());
  const row = (leaf: number, field: keyof typeof F) => m.nums![leaf * FIELDS + F[field]]!;
  const invalid = "MTC_ERR_INVALID_ARGUMENT";
  // Where a DeviceTensor lies (its address is the block's first byte plus its offset).
  refused(() => takeResult(edited(m, A, "offset", 1 << 30)), invalid, "lie past its block", ".a");
  refused(() => takeResult(edited(m, A, "offset", row(A, "offset") + 2, [[0, 2]])), invalid, "misaligned", ".a"); // inside the block
  refused(() => takeResult(edited(m, A, "offset", row(A, "offset") + 4)), invalid, "lie past its block", ".a");
  refused(() => takeResult(edited(m, A, "offset", -16)), invalid, "no index", ".a");
  refused(() => takeResult(edited(m, A, "offset", 0.5)), invalid, "no index", ".a");
  refused(() => takeResult(edited(m, A, "offset", 2 ** 53)), invalid, "no index", ".a");
  // Its size: the shape and the dtype.
  const wide = structuredClone(m) as { dims: Float64Array };
  wide.dims[0] = 1 << 30; // a's shape [4] → [2^30]
  refused(() => takeResult(wide as unknown as Moved), invalid, "lie past its block", ".a");
  const negative = structuredClone(m) as { dims: Float64Array };
  negative.dims[0] = -4;
  refused(() => takeResult(negative as unknown as Moved), invalid, "not of integers >= 0", ".a");
  refused(() => takeResult(edited(m, A, "dtype", 12)), invalid, "lie past its block", ".a"); // float64: 32 of 16 bytes
  refused(() => takeResult(edited(m, A, "dtype", 99)), invalid, "dtype code is 99", ".a");
  refused(() => takeResult(edited(m, A, "ndim", 3)), invalid, "");
  refused(() => takeResult(edited(m, A, "ndim", 99)), invalid, "dimensions", ".a");
  // Which block, and of what kind and device.
  refused(() => takeResult(edited(m, A, "block", 7)), invalid, "no index", ".a"); // more than there are leaves
  refused(() => takeResult(edited(m, A, "block", 4)), invalid, "name 5 blocks but its parcel holds 4");
  refused(() => takeResult(edited(m, A, "block", row(P, "block"))), invalid, "names a block of host memory", ".a");
  refused(() => takeResult(edited(m, A, "block", -1)), invalid, "has no block", ".a");
  refused(() => takeResult(edited(m, A, "device", 1)), invalid, "names a block on cuda:0", ".a");
  refused(() => takeResult(edited(m, A, "kind", 1)), invalid, "", ".a");
  refused(() => takeResult(edited(m, B, "flags", 64)), invalid, "flags", ".deep[0].b");
  // A pinned view: its length, offset, block and shape.
  refused(() => takeResult(edited(m, P, "length", 1 << 20, [[1, 1 << 20]])), invalid, "lie past its block", ".p");
  refused(() => takeResult(edited(m, P, "offset", 4)), invalid, "misaligned", ".p");
  refused(() => takeResult(edited(m, P, "block", row(A, "block"))), invalid, "names a block of device memory", ".p");
  const two = structuredClone(m) as { nums: Float64Array; dims: Float64Array };
  two.nums[P * FIELDS + F.length] = 2;
  two.nums[P * FIELDS + F.block] = row(A, "block");
  two.dims[1] = 2;
  refused(() => takeResult(two as unknown as Moved), invalid, "names a block of device memory", ".p"); // 16 bytes: they would fit
  refused(() => takeResult(edited(m, P, "length", 9)), invalid, "is not [9]", ".p");
  refused(() => takeResult(edited(m, T, "length", 5)), invalid, "is not the 5 values", ".t");
  refused(() => takeResult(edited(m, T, "kind", 2)), invalid, "", ".t");
  // A block the rows no longer name (b's, the last): the parcel holds more than they say.
  assertSame(row(B, "block"), 3, "b's block is the last of four");
  refused(() => takeResult(edited(m, B, "block", row(A, "block"))), invalid, "parcel holds 4");
  refused(() => takeResult(edited(m, A, "block", row(B, "block"))), invalid, "no leaf names block 0");
  // Fields of an older message format carry nothing: ignored.
  const got = takeResult({ ...m, blocks: new Float64Array([1, 2, 3, 4]) } as Moved) as Mixed;
  checkMixed(got);
  disposeAll(got);
});

moveTest("a parcel's ref that is no block (a plan) named as a leaf's block is refused", () => {
  const view = new DataView(new ArrayBuffer(OPTIONS_SIZE));
  encodeOptions(resolveOptions(undefined), view);
  const out = new Uint32Array(2);
  assertSame(sym().mtc_plan_create(0, new Uint8Array(view.buffer), out), 0);
  const plan = out[0]! + out[1]! * 2 ** 32;
  const m = moveResult({ x: 1 });
  assert(sym().mtc_ref_adopt!(m.parcel, 2 /* MTC_REF_PLAN */, plan) !== 0, "the plan is the parcel's");
  // An empty float32 DeviceTensor in block 0: nothing but the block's kind is wrong.
  const row = new Float64Array(FIELDS);
  row[F.dtype] = 11;
  row[F.ndim] = 1;
  const forged = { ...m, template: "[[1, \"x\", -1]]", nums: row, dims: new Float64Array([0]), data: [] } as Moved;
  refused(() => takeResult(forged), "MTC_ERR_INVALID_ARGUMENT", "no block of memory", ".x");
  const parcels = held().parcels;
  dropMoved(m); // releases the plan with the parcel
  assertSame(held().parcels, parcels - 1);
});

moveTest("a message kept from another process is unknown here: refused, and this process's parcels stay as they were", async () => {
  const child = new URL("./fixtures/move_stale.ts", import.meta.url).pathname;
  const runs = [await runScript(child, [], {}), await runScript(child, [], {})];
  for (const run of runs) assertSame(run.code, 0, run.stderr);
  const [printed, other] = runs.map((run) => JSON.parse(run.stdout.trim().split("\n").pop()!) as { owner: number; message: Moved & { nums: number[]; dims: number[] } });
  // Two processes that did the same things number their owners and parcels apart (a key of their own).
  assert(printed!.owner !== other!.owner && printed!.message.parcel !== other!.message.parcel, `ids of two processes: ${printed!.owner}, ${other!.owner}`);
  const stale = { ...printed!.message, nums: new Float64Array(printed!.message.nums), dims: new Float64Array(printed!.message.dims) } as Moved;
  // Live parcels here, of the same structure as the stale one.
  const here = [1, 2, 3].map(async () => {
    const onGpu = await startCopy({ a: new Float32Array([1, 2, 3, 4]) }, "cuda:0");
    return moveResult({ a: onGpu.a, p: pinnedArray("float64", 8).fill(5) });
  });
  const live = await Promise.all(here);
  assertSame(stale.template, live[0]!.template, "the same structure");
  const e = refused(() => takeResult(stale), "MTC_ERR_INVALID_STATE", "another process");
  assert(e.message.includes(String(stale.parcel)), e.message);
  const before = held();
  dropMoved(stale); // unknown: nothing to give back
  assertSame(dropMovedFrom(printed!.owner), 0, "a stale sender's id names no parcel here");
  assert(!ownerAlive(printed!.owner), "nor an owner");
  assertEquals(held(), before, "this process's parcels are untouched");
  for (const m of live) {
    const got = takeResult(m) as { a: DeviceTensor; p: Float64Array };
    assertEquals(Array.from(got.a.toHost() as Float32Array), [1, 2, 3, 4]);
    assertEquals(Array.from(got.p), [5, 5, 5, 5, 5, 5, 5, 5]);
    disposeAll(got);
  }
});

moveTest("ids with another key (as another process would number them) name nothing: refused", async () => {
  const onGpu = await startCopy({ a: new Float32Array([7, 8]) }, "cuda:0");
  const m = moveResult(onGpu);
  const flip = (id: number) => (Math.floor(id / 2 ** 40) % 2 === 1 ? id - 2 ** 40 : id + 2 ** 40);
  refused(() => takeResult({ ...m, parcel: flip(m.parcel) }), "MTC_ERR_INVALID_STATE", "is unknown here");
  assertSame(dropMovedFrom(flip(threadOwner())), 0);
  assert(!ownerAlive(flip(threadOwner())), "another key's owner id is not alive here");
  const got = takeResult(m);
  assertEquals(Array.from(got.a.toHost() as Float32Array), [7, 8]);
  disposeAll(got);
});

moveTest("a thread owner's id as a message's parcel: dropMoved and takeResult refuse it; the thread's arrays stay intact", async () => {
  const mine = await startCopy({ a: new Float32Array([1, 2, 3]) }, "cuda:0");
  const p = pinnedArray("int32", 4).fill(3);
  const m = moveResult({ x: 1 });
  const forged = { ...m, parcel: threadOwner() };
  refused(() => dropMoved(forged), "MTC_ERR_INVALID_ARGUMENT", "is no parcel (a thread's owner)");
  refused(() => takeResult(forged), "MTC_ERR_INVALID_ARGUMENT", "is no parcel (a thread's owner)");
  assert(ownerAlive(threadOwner()), "this thread's owner lives");
  assertEquals(Array.from(mine.a.toHost() as Float32Array), [1, 2, 3], "its DeviceTensor still reads");
  assertEquals(Array.from(p), [3, 3, 3, 3], "its pinned array still reads");
  assertSame(takeResult(m).x, 1);
  disposeAll([mine, p]);
});

moveTest("take once, for every message: with no C references, errors, clones, and after dropMoved", () => {
  const m = moveResult({ x: 1, s: "a", list: [1, 2] });
  const copy = structuredClone(m);
  assertEquals(takeResult(m), { x: 1, s: "a", list: [1, 2] });
  refused(() => takeResult(m), "MTC_ERR_INVALID_STATE", "taken already");
  refused(() => takeResult(copy), "MTC_ERR_INVALID_STATE", "taken already");
  const dropped = moveResult(5);
  dropMoved(dropped);
  refused(() => takeResult(dropped), "MTC_ERR_INVALID_STATE", "dropped");
  const error = moveResult(new RangeError("far"));
  assertSame((takeResult(error) as Error).message, "far");
  refused(() => takeResult(error), "MTC_ERR_INVALID_STATE", "taken already");
  // A message with its parcel taken away is refused, not taken as having none.
  const three = moveResult(3);
  refused(() => takeResult({ ...three, parcel: 0 }), "MTC_ERR_INVALID_ARGUMENT", "names no parcel");
  assertSame(takeResult(three), 3);
});

moveTest("\"__proto__\" keys travel as own keys, in plain and bare objects; disposeAll finds their tensors", async () => {
  const onGpu = await startCopy({ a: new Float32Array([1, 2]), b: new Float32Array([3]) }, "cuda:0");
  const own = (o: object, v: unknown) => Object.defineProperty(o, "__proto__", { value: v, enumerable: true, writable: true, configurable: true });
  const plain = own({ k: 1 }, onGpu.a);
  const bare = own(Object.create(null), { inner: onGpu.b });
  const got = takeResult(moveResult({ plain, bare })) as { plain: Record<string, unknown>; bare: Record<string, { inner: DeviceTensor }> };
  assertSame(Object.getPrototypeOf(got.plain), Object.prototype, "the prototype is untouched");
  assertSame(Object.getPrototypeOf(got.bare), null);
  assert(Object.hasOwn(got.plain, "__proto__") && Object.hasOwn(got.bare, "__proto__"), "own keys");
  assertEquals(Object.keys(got.plain), ["k", "__proto__"]);
  const a = Object.getOwnPropertyDescriptor(got.plain, "__proto__")!.value as DeviceTensor;
  const b = Object.getOwnPropertyDescriptor(got.bare, "__proto__")!.value.inner as DeviceTensor;
  assertEquals(Array.from(a.toHost() as Float32Array), [1, 2]);
  disposeAll(got);
  assert(a.disposed && b.disposed, "disposeAll reached them");
});

moveTest("a pinned array or tensor moved twice is refused, naming it; so is a detached array", () => {
  const p = pinnedArray("float32", 4).fill(1);
  const t = pinnedTensor("int16", [2, 2]);
  const m = moveResult({ p, t });
  refused(() => moveResult({ again: p }), "MTC_ERR_INVALID_STATE", "moved already", ".again");
  refused(() => moveResult([t]), "MTC_ERR_INVALID_STATE", "moved already", "[0]");
  const buffer = new ArrayBuffer(8);
  const view = new Float64Array(buffer);
  buffer.transfer();
  refused(() => moveResult({ view }), "MTC_ERR_INVALID_STATE", "detached", ".view");
  const got = takeResult(m) as { p: Float32Array; t: Tensor };
  assertEquals(Array.from(got.p), [1, 1, 1, 1]);
  disposeAll(got);
});
