// Prepared copyInto (prepareCopyInto): the same sources' structure into the
// same DeviceTensors every step. The destinations hold the bytes copyInto
// would write, from host, arena and GPU sources; a source that differs, or
// a destination disposed (by the caller or by a getter in the source), is
// refused with its path before anything is written. Emulated driver.
import { Arena, copyInto, type DeviceTensor, disposeAll, MtcError, prepareCopyInto, startCopy, Tensor } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertSame, assertThrows, test } from "./harness.ts";
import { assertPoolsBack, checkBatch, patterned, poolMark } from "./fixtures/checks.ts";

const skip = skipWithoutDriver;

function step(seed: number): Record<string, unknown> {
  return {
    ids: patterned(Int32Array, 64, seed),
    pos: new Tensor(patterned(Float32Array, 12, seed), [3, 4]),
    kv: [patterned(Uint16Array, 100, seed), new Tensor(patterned(Float64Array, 30, seed), [2, 3, 5], "float64", { strides: [1, 2, 6] })],
    empty: new Float32Array(0),
    tag: `s${seed}`,
  };
}

async function onHost(value: unknown): Promise<unknown> {
  return await startCopy(value, "cpu", { usePinnedStaging: false });
}

for (const device of ["cuda:0", "cuda:1"] as const) {
  test(`host sources into fixed DeviceTensors on ${device}: copyInto's bytes, step after step`, async () => {
    const mark = poolMark();
    const buffers = await startCopy(step(0), device);
    const plainBuffers = await startCopy(step(0), device);
    using prepared = prepareCopyInto(step(1), buffers);
    for (let seed = 2; seed < 6; seed++) {
      const source = step(seed);
      const got = await prepared.start(source);
      assertSame(got, buffers, "the destination comes back");
      await copyInto(source, plainBuffers);
      checkBatch(await onHost(buffers), await onHost(plainBuffers), null, `step ${seed}`);
    }
    prepared.dispose();
    disposeAll([buffers, plainBuffers]);
    assertPoolsBack(mark, "prepared copyInto");
  }, { skip });
}

test("arena sources and GPU sources of another device", async () => {
  const mark = poolMark();
  using arena = Arena.create(1 << 16);
  const fill = (seed: number) => {
    arena.reset();
    const a = arena.tensor("float32", [8, 8]);
    (a.data as Float32Array).set(patterned(Float32Array, 64, seed));
    const b = arena.array("int16", 33);
    b.set(patterned(Int16Array, 33, seed));
    return { a, b };
  };
  const buffers = await startCopy(fill(0), "cuda:0");
  using prepared = prepareCopyInto(fill(1), buffers);
  for (let seed = 2; seed < 5; seed++) {
    const source = fill(seed);
    await prepared.start(source);
    checkBatch(await onHost(buffers), source, null, `arena ${seed}`);
  }
  const fromOne = await startCopy(step(7), "cuda:1");
  const dst = await startCopy(step(0), "cuda:0");
  using peer = prepareCopyInto(fromOne, dst);
  const again = await startCopy(step(8), "cuda:1");
  await peer.start(again);
  checkBatch(await onHost(dst), await onHost(again), null, "cuda:1 → cuda:0");
  prepared.dispose();
  peer.dispose();
  disposeAll([buffers, fromOne, dst, again]);
  arena.dispose();
  assertPoolsBack(mark, "arena and peer");
}, { skip });

test("a source that differs, and a destination disposed, are refused with their paths", async () => {
  const buffers = await startCopy(step(0), "cuda:0");
  using prepared = prepareCopyInto(step(1), buffers);
  const longer = step(2);
  longer.ids = patterned(Int32Array, 65, 2);
  assertSame(assertThrows(() => prepared.start(longer), MtcError, "260 bytes, the sample's 256").path, ".ids");
  // A getter in the source disposes a destination: refused after the read, before C.
  const hostile = step(3);
  Object.defineProperty(hostile, "tag", { enumerable: true, get: () => ((buffers.pos as DeviceTensor).dispose(), "x") });
  const e = assertThrows(() => prepared.start(hostile), MtcError, "the destination DeviceTensor was disposed");
  assertSame(e.path, ".pos");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  disposeAll(buffers);
  assertThrows(() => prepareCopyInto({ ids: patterned(Int32Array, 4, 1) }, { ids: new Int32Array(4) }), MtcError, "must be DeviceTensors");
}, { skip });
