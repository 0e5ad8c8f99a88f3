// One class identity whatever number of copies of the library a program
// loads. Second copies are made here as a bundle, a worker or a second
// install makes them: ts/ copied into a temporary folder (its zig-out a link
// to this checkout's, so both load the one libmtc) and imported. Through the
// npm package's entry (ts/npm.ts), a copy of this version hands out the
// first copy's classes; imported by its ts/mod.ts it keeps its own, and its
// objects are refused with an MtcError naming both copies, as are a copy's
// of another version (its version string patched). Emulated driver.
import { execFileSync } from "node:child_process";
import {
  Arena,
  AsyncCopyHandle,
  copyInto,
  CudaEvent,
  DeviceTensor,
  disposeAll,
  Kernel,
  Module,
  moveResult,
  MtcError,
  pinnedTensor,
  startArenaCopy,
  startCopy,
  startLoader,
  Stream,
  Tensor,
} from "../../ts/mod.ts";
import * as mod from "../../ts/mod.ts";
import * as npm from "../../ts/npm.ts";
import { foreignCopy } from "../../ts/base/copy_identity.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";
import { assertPoolsBack, poolMark } from "./fixtures/checks.ts";
import { expectCountersBack, settledCounters } from "./fixtures/threads.ts";

type Library = typeof mod;

const ROOT = decodeURIComponent(new URL("../../", import.meta.url).pathname).replace(/\/$/, "");
const MARK_KEY = Symbol.for("multi-tensor-copier.copy");
const made: string[] = [];

/** A copy of ts/ in a new temporary folder, its BINDINGS_VERSION patched to `version` if given; the folder's URL. */
function copyOfTs(version?: string): string {
  const dir = execFileSync("mktemp", ["-d", "/tmp/mtc-second-copy.XXXXXX"]).toString().trim();
  made.push(dir);
  execFileSync("cp", ["-r", `${ROOT}/ts`, `${dir}/ts`]);
  execFileSync("ln", ["-s", `${ROOT}/zig-out`, `${dir}/zig-out`]);
  if (version !== undefined) {
    const file = `${dir}/ts/base/copy_identity.ts`;
    execFileSync("sed", ["-i", `s/^export const BINDINGS_VERSION = "[^"]*";$/export const BINDINGS_VERSION = "${version}";/`, file]);
    assert(execFileSync("cat", [file]).toString().includes(`BINDINGS_VERSION = "${version}";`), "the version string was patched");
  }
  return `file://${dir}/`;
}

// This checkout's npm entry first: it registers this realm's copy of the version (the exports of ts/mod.ts).
const sameVersion = copyOfTs();
const adopted = (await import(`${sameVersion}ts/npm.ts`)) as Library;
const unadopted = (await import(`${sameVersion}ts/mod.ts`)) as Library;
const otherVersion = copyOfTs("0.2.0");
const other = (await import(`${otherVersion}ts/mod.ts`)) as Library;
const otherNpm = (await import(`${otherVersion}ts/npm.ts`)) as Library;

const copyTest = (name: string, fn: () => void | Promise<void>) => test(`second copy: ${name}`, fn, { skip: skipWithoutDriver });

/** One leaf of each kind made by `lib`: a Tensor, an arena tensor and array, a pinned tensor; and the arena. */
function leavesOf(lib: Library): { batch: Record<string, unknown>; arena: Arena } {
  const arena = lib.Arena.create(1 << 16);
  const arenaTensor = arena.tensor("float32", [2, 3]);
  (arenaTensor.data as Float32Array).set([1, 2, 3, 4, 5, 6]);
  const arenaArray = arena.array("int32", 4);
  arenaArray.set([7, 8, 9, 10]);
  const pinned = lib.pinnedTensor("float64", [3]);
  (pinned.data as Float64Array).set([0.5, 1.5, 2.5]);
  const tensor = new lib.Tensor(new Uint16Array([11, 12, 13, 14]), [2, 2]);
  return { batch: { tensor, arenaTensor, arenaArray, pinned }, arena };
}

/** The values of a copy's result, as numbers. */
function valuesOf(onDevice: unknown): number[] {
  assert(onDevice instanceof DeviceTensor, `a DeviceTensor of this copy, got ${String(onDevice)}`);
  const back = onDevice.toTensor();
  return Array.from(back.data as ArrayLike<number>);
}

copyTest("the npm entry exports the names of mod.ts, which the package's declarations describe", () => {
  assertEquals(Object.keys(npm).sort(), Object.keys(mod).sort());
});

copyTest("same version through the npm entry: the first copy's classes; its arena and pinned leaves are read in place", async () => {
  assertSame(npm.Tensor, Tensor, "this checkout's npm entry registered first");
  for (const name of Object.keys(mod)) {
    assertSame((adopted as Record<string, unknown>)[name], (mod as Record<string, unknown>)[name], `the second copy's ${name}`);
  }
  const mark = poolMark();
  const { batch, arena } = leavesOf(adopted);
  const handle = startCopy(batch, "cuda:0");
  const onGpu = await handle;
  assertEquals(valuesOf(onGpu.arenaTensor), [1, 2, 3, 4, 5, 6]);
  assertEquals(valuesOf(onGpu.arenaArray), [7, 8, 9, 10]);
  assertEquals(valuesOf(onGpu.pinned), [0.5, 1.5, 2.5]);
  assertEquals(valuesOf(onGpu.tensor), [11, 12, 13, 14]);
  const stats = handle.stats();
  assertSame(stats.leavesDirect, 3, "the arena's two leaves and the pinned tensor read in place");
  assertSame(stats.bytesStaged, 8, "only the pageable Tensor staged");
  disposeAll(onGpu);
  disposeAll(batch);
  arena.dispose();
  assertPoolsBack(mark, "same version, adopted");
});

/** What the refusals of the copy not adopted name: it, and this copy. */
const THEIRS = `another copy of multi-tensor-copier 0.1.0 (loaded from ${sameVersion}ts/base/copy_identity.ts)`;
const OURS = `this copy, multi-tensor-copier 0.1.0 (loaded from ${new URL("../../ts/base/copy_identity.ts", import.meta.url).href})`;

/**
 * A test with objects of the copy not adopted (imported by its mod.ts): its
 * leaves (leavesOf), a DeviceTensor of its own and one of this copy's; all
 * given back after, and the pools where they were.
 */
function unadoptedTest(name: string, fn: (theirs: { batch: Record<string, unknown>; arena: Arena; onGpu: DeviceTensor }, mine: DeviceTensor) => void) {
  copyTest(`not adopted: ${name}`, async () => {
    assert(unadopted.Tensor !== Tensor, "the copy imported by its mod.ts keeps its own classes");
    const mark = poolMark();
    const { batch, arena } = leavesOf(unadopted);
    const mine = await startCopy({ x: new Float32Array([1, 2]) }, "cuda:0");
    const theirs = await unadopted.startCopy({ y: new Float32Array([3, 4]) }, "cuda:0");
    try {
      fn({ batch, arena, onGpu: theirs.y }, mine.x);
    } finally {
      disposeAll(mine);
      unadopted.disposeAll([theirs, batch]);
      arena.dispose();
    }
    assertPoolsBack(mark, name);
  });
}

unadoptedTest("startCopy refuses its Tensors, pinned tensors, DeviceTensors and Streams, naming both copies; it refuses ours", ({ batch, onGpu }) => {
  for (const key of ["tensor", "pinned"]) {
    const e = assertThrows(() => startCopy({ cams: [{ [key]: batch[key] }] }, "cuda:0"), MtcError, `.cams[0].${key}: a Tensor of ${THEIRS}, which ${OURS}, cannot use`);
    assertSame(e.path, `.cams[0].${key}`);
  }
  assertThrows(() => startCopy([onGpu], "cuda:1"), MtcError, `[0]: a DeviceTensor of ${THEIRS}`);
  using stream = unadopted.Stream.create("cuda:0");
  assertThrows(() => startCopy({ s: stream }, "cpu"), MtcError, `.s: a Stream of ${THEIRS}`);
  const ours = `.t: a Tensor of another copy of multi-tensor-copier 0.1.0 (loaded from file://${ROOT}/ts/base/copy_identity.ts)`;
  assertThrows(() => unadopted.startCopy({ t: new Tensor(new Float32Array(2), [2]) }, "cuda:0"), unadopted.MtcError, ours);
});

unadoptedTest("copyInto refuses its DeviceTensor as the source", ({ onGpu }, mine) => {
  assertThrows(() => copyInto({ a: onGpu }, { a: mine }), MtcError, `.a: the source is a DeviceTensor of ${THEIRS}`);
});

unadoptedTest("copyInto refuses its DeviceTensor as the destination", ({ onGpu }, mine) => {
  assertThrows(() => copyInto({ a: mine }, { a: onGpu }), MtcError, `.a: the destination is a DeviceTensor of ${THEIRS}`);
});

unadoptedTest("moveResult refuses its Tensor and DeviceTensor, naming both copies, and moves nothing of ours", ({ batch, onGpu }, mine) => {
  assertThrows(() => moveResult({ mine, theirs: batch.tensor }), MtcError, `.theirs: moveResult: a Tensor of ${THEIRS}`);
  assertThrows(() => moveResult({ mine, theirs: onGpu }), MtcError, `.theirs: moveResult: a DeviceTensor of ${THEIRS}`);
  assert(!mine.disposed, "our DeviceTensor stays with us");
});

unadoptedTest("the option strict finds its Tensor inside an object passed through", ({ batch }) => {
  class Sample {
    constructor(readonly depths: unknown) {}
  }
  assertThrows(() => startCopy({ s: new Sample(batch.tensor) }, "cuda:0", { strict: true }), MtcError, `it holds a Tensor of ${THEIRS} at .depths`);
});

unadoptedTest("Arena#consolidate refuses its Tensor", ({ batch }) => {
  using own = Arena.create(1 << 12);
  assertThrows(() => own.consolidate({ t: batch.tensor }), MtcError, `.t: Arena.consolidate: a Tensor of ${THEIRS}`);
});

unadoptedTest("startArenaCopy refuses its Arena", ({ arena }) => {
  assertThrows(() => startArenaCopy(arena, "cuda:0"), MtcError, `startArenaCopy: an Arena of ${THEIRS}`);
});

unadoptedTest("disposeAll disposes this copy's tensors, then names its DeviceTensor, left alone", ({ onGpu }, mine) => {
  assertThrows(() => disposeAll([{ x: mine }, { y: onGpu }]), MtcError, `disposeAll: a DeviceTensor of ${THEIRS}`);
  assert(mine.disposed, "this copy's tensor disposed first");
  assert(!onGpu.disposed, "the other copy's left alone");
});

copyTest("another version: its objects are refused naming both versions, and it adopts nothing of this one", async () => {
  assert(otherNpm.Tensor === other.Tensor && otherNpm.Tensor !== Tensor, "the 0.2.0 copy's npm entry keeps its own classes");
  const mark = poolMark();
  const theirs = other.pinnedTensor("float32", [2]);
  try {
    assertThrows(() => startCopy({ t: theirs }, "cuda:0"), MtcError, `.t: a Tensor of multi-tensor-copier 0.2.0 (loaded from ${otherVersion}ts/base/copy_identity.ts), which this copy, multi-tensor-copier 0.1.0`);
    const e = assertThrows(() => other.startCopy([new Tensor(new Int8Array(1), [1])], "cuda:0"), other.MtcError, "[0]: a Tensor of multi-tensor-copier 0.1.0");
    assert(e.message.includes("which this copy, multi-tensor-copier 0.2.0"), e.message);
  } finally {
    theirs.dispose();
  }
  assertPoolsBack(mark, "another version");
});

copyTest("every public class of a copy carries its mark", () => {
  const classes = { Arena, AsyncCopyHandle, CudaEvent, DeviceTensor, Kernel, Module, Stream, Tensor };
  for (const [name, ours] of Object.entries(classes)) {
    const theirs = (unadopted as unknown as Record<string, { prototype: object }>)[name]!;
    assertSame(foreignCopy(Object.create(ours.prototype)), undefined, `this copy's ${name}`);
    const said = foreignCopy(Object.create(theirs.prototype));
    assert(said?.replace(/^an? /, "").startsWith(`${name} of another copy of multi-tensor-copier 0.1.0`), `the other copy's ${name}: ${said}`);
  }
});

copyTest("a getter or a Proxy cannot fool the recognition; a mark only ever refuses", async () => {
  const ourMark = Object.getOwnPropertyDescriptor(Tensor.prototype, MARK_KEY)!.value;
  const names = "a Tensor of another copy of multi-tensor-copier 0.1.0";
  // A getter at the mark's key, own or inherited, is never called.
  let calls = 0;
  const withGetter = new unadopted.Tensor(new Float32Array(2), [2]);
  Object.defineProperty(withGetter, MARK_KEY, { get: () => (calls++, ourMark) });
  assertThrows(() => startCopy({ t: withGetter }, "cuda:0"), MtcError, `.t: ${names}`);
  // This copy's own mark put on the other copy's object hides nothing of its prototype's.
  const disguised = new unadopted.Tensor(new Float32Array(2), [2]);
  Object.defineProperty(disguised, MARK_KEY, { value: ourMark });
  assertThrows(() => startCopy({ t: disguised }, "cuda:0"), MtcError, `.t: ${names}`);
  // A Proxy's traps other than getPrototypeOf are not run.
  const proxy = new Proxy(new unadopted.Tensor(new Float32Array(2), [2]), {
    get: () => (calls++, undefined),
    has: () => (calls++, false),
    ownKeys: () => (calls++, []),
  });
  assertThrows(() => startCopy({ t: proxy }, "cuda:0"), MtcError, `.t: ${names}`);
  assertSame(calls, 0, "no getter or trap ran");
  // The other copy's DeviceTensor moved onto this copy's prototype has no state of this copy's: refused, its fields unread.
  const theirs = await unadopted.startCopy({ y: new Float32Array([3, 4]) }, "cuda:0");
  try {
    Object.setPrototypeOf(theirs.y, DeviceTensor.prototype);
    assertThrows(() => startCopy([theirs.y], "cuda:1"), MtcError, "[0]: not a DeviceTensor made by this library");
    Object.setPrototypeOf(theirs.y, unadopted.DeviceTensor.prototype);
  } finally {
    unadopted.disposeAll(theirs);
  }
  // A mark claiming another version, put on this copy's DeviceTensor, changes nothing: its private state decides.
  const mine = await startCopy({ x: new Float32Array([1, 2]) }, "cuda:0");
  Object.defineProperty(mine.x, MARK_KEY, { value: Object.freeze({ library: "multi-tensor-copier", version: "9.9.9", where: "forged", kind: "DeviceTensor" }) });
  const back = await startCopy(mine, "cpu");
  assertEquals(Array.from(back.x as Float32Array), [1, 2]);
  disposeAll([mine, back]);
  // On a plain class instance, a forged mark is a claim to be another copy's object: refused, never accepted.
  const claim = new (class Claim {})();
  Object.defineProperty(claim, MARK_KEY, { value: Object.freeze({ library: "multi-tensor-copier", version: "9.9.9", where: "forged", kind: "DeviceTensor" }) });
  assertThrows(() => startCopy({ c: claim }, "cuda:0"), MtcError, ".c: a DeviceTensor of multi-tensor-copier 9.9.9 (loaded from forged)");
});

copyTest("a loader whose producer imports a second copy through its npm entry: every leaf copied, arena leaves in place", async () => {
  const before = await settledCounters();
  const loader = startLoader<Record<string, DeviceTensor>>({ module: new URL("./fixtures/second_copy_batches.ts", import.meta.url), device: "cuda:0", workers: 1, batches: 2, args: { library: `${sameVersion}ts/npm.ts` } });
  let batches = 0;
  for await (const batch of loader) {
    assertEquals(valuesOf(batch.arenaTensor), [1, 2, 3, 4, 5, 6]);
    assertEquals(valuesOf(batch.arenaArray), [7, 8, 9, 10]);
    assertEquals(valuesOf(batch.pinned), [0.5, 1.5, 2.5]);
    assertEquals(valuesOf(batch.tensor), [11, 12, 13, 14]);
    // Read in place, the arena's two leaves land in one block at their distance in the arena (staged: packed apart from it).
    assert(batch.arenaTensor!.block === batch.arenaArray!.block && batch.arenaArray!.offset - batch.arenaTensor!.offset === 32, "arena leaves read in place");
    assert(batch.tensor!.block !== batch.arenaTensor!.block, "the pageable Tensor staged apart");
    disposeAll(batch);
    batches++;
  }
  assertSame(batches, 2);
  // Imported by its mod.ts, the copy keeps its own classes: the worker refuses its leaves, naming both copies.
  const refused = startLoader({ module: new URL("./fixtures/second_copy_batches.ts", import.meta.url), device: "cuda:0", workers: 1, batches: 1, args: { library: `${sameVersion}ts/mod.ts` } });
  await assertRejects(() => refused.next(), MtcError, `.tensor: a Tensor of another copy of multi-tensor-copier 0.1.0 (loaded from ${sameVersion}ts/base/copy_identity.ts)`);
  await refused.close();
  // The workers' arenas and pinned tensors go with their threads.
  await expectCountersBack(before, "loader with a second copy");
});

test("second copy: the temporary copies are removed", () => {
  for (const dir of made.splice(0)) execFileSync("rm", ["-rf", dir]);
});
