// What a hostile caller found in prepared copies, and its siblings in the
// plain calls: results of copies that copied nothing are disposed without a
// complaint; methods called on forged or proxied objects are MtcErrors; a
// Proxy of a Map in a batch is an MtcError with its path (prepareCopy,
// start, startCopy, copyInto, consolidate); a DeviceTensor placed as it is
// and disposed by a later getter is refused, not handed back disposed.
import { Arena, copyInto, type DeviceTensor, disposeAll, MtcError, prepareCopy, prepareCopyInto, PreparedCopy, PreparedCopyInto, startCopy } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertSame, assertThrows, test } from "./harness.ts";
import { patterned } from "./fixtures/checks.ts";

const skip = skipWithoutDriver;

test("disposeResult of a prepared copy that copies no leaf does nothing, whatever its result", async () => {
  const placed = await startCopy(patterned(Float32Array, 4, 1), "cuda:0");
  for (const sample of [{}, { x: 1 }, null, { a: placed }]) {
    using prepared = prepareCopy(sample, "cuda:0");
    const result = await prepared.start(sample);
    prepared.disposeResult(result);
    prepared.disposeResult(result);
  }
  assertSame(placed.disposed, false, "a tensor placed as it is stays the caller's");
  placed.dispose();
}, { skip });

test("methods called on a forged or proxied prepared copy are MtcErrors", async () => {
  using real = prepareCopy({ x: patterned(Float32Array, 4, 1) }, "cuda:0");
  const buffers = await startCopy({ x: patterned(Float32Array, 4, 1) }, "cuda:0");
  using into = prepareCopyInto({ x: patterned(Float32Array, 4, 2) }, buffers);
  const forged = Object.create(PreparedCopy.prototype) as PreparedCopy;
  const proxied = new Proxy(real, {});
  for (const [what, call] of [
    ["start", () => forged.start({})],
    ["disposeResult", () => forged.disposeResult({})],
    ["dispose", () => forged.dispose()],
    ["leafCount", () => forged.leafCount],
    ["device", () => forged.device],
    ["start", () => proxied.start({ x: patterned(Float32Array, 4, 1) })],
    ["start", () => PreparedCopy.prototype.start.call(into as never, {})],
  ] as const) {
    assertThrows(call, MtcError, `PreparedCopy.${what}: this is not a PreparedCopy made by prepareCopy`);
  }
  const forgedInto = Object.create(PreparedCopyInto.prototype) as PreparedCopyInto;
  assertThrows(() => forgedInto.start({}), MtcError, "PreparedCopyInto.start: this is not a PreparedCopyInto");
  assertThrows(() => PreparedCopyInto.prototype.dispose.call(real as never), MtcError, "PreparedCopyInto.dispose: this is not");
  disposeAll(buffers);
}, { skip });

test("a Proxy of a Map in a batch is an MtcError with its path, in every walk", async () => {
  const sample = { x: { m: new Map([["a", patterned(Float32Array, 4, 1)]]) } };
  const proxied = () => ({ x: { m: new Proxy(new Map([["a", patterned(Float32Array, 4, 2)]]), {}) } });
  using prepared = prepareCopy(sample, "cuda:0");
  const cases: [string, () => unknown][] = [
    ["prepareCopy", () => prepareCopy(proxied(), "cuda:0")],
    ["start", () => prepared.start(proxied())],
    ["startCopy", () => startCopy(proxied(), "cuda:0")],
  ];
  const buffers = await startCopy(sample, "cuda:0");
  cases.push(["copyInto", () => copyInto(proxied(), buffers)]);
  using arena = Arena.create(1 << 12);
  cases.push(["consolidate", () => arena.consolidate(proxied())]);
  // A getter that gives a Map to startCopy's check of the sample, then a Proxy of one to the template's read.
  let reads = 0;
  const swapping = { x: {} as Record<string, unknown> };
  Object.defineProperty(swapping.x, "m", { enumerable: true, get: () => (reads++ === 0 ? sample.x.m : proxied().x.m) });
  cases.push(["prepareCopy, the second read", () => prepareCopy(swapping, "cuda:0")]);
  for (const [what, call] of cases) {
    const e = assertThrows(call, MtcError, "cannot be read as one (a Proxy of a Map?)");
    assertSame(e.path, ".x.m", `${what}: the path`);
  }
  disposeAll(buffers);
}, { skip });

test("a DeviceTensor placed as it is and disposed by a later getter is refused, not handed back disposed", async () => {
  const make = async () => ({ a: await startCopy(patterned(Float32Array, 4, 1), "cuda:0"), b: patterned(Int32Array, 4, 1) });
  const sample = await make();
  using prepared = prepareCopy(sample, "cuda:0");
  for (const [what, copy] of [
    ["start", (b: unknown) => prepared.start(b as typeof sample)],
    ["startCopy", (b: unknown) => startCopy(b, "cuda:0")],
  ] as const) {
    const placed = (await make()).a as DeviceTensor;
    const batch = { a: placed } as Record<string, unknown>;
    Object.defineProperty(batch, "b", { enumerable: true, get: () => (placed.dispose(), patterned(Int32Array, 4, 2)) });
    const e = assertThrows(() => copy(batch), MtcError, "disposed while the batch was read");
    assertSame(e.path, ".a", `${what}: the path`);
    assertSame(e.code, "MTC_ERR_INVALID_STATE");
  }
  disposeAll(sample);
}, { skip });
