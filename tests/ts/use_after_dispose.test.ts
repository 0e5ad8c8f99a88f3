// One code for every use after dispose (issue 35, item 8): whichever call
// finds a DeviceTensor disposed, pinned memory released, or an arena, a
// stream or a prepared copy disposed, it throws MTC_ERR_INVALID_STATE, with
// the leaf's path where there is one. disposed.test.ts has the direct
// calls (address, toHost, copies, handles, streams, events, modules); these
// are the paths through the other entry points.
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import {
  Arena,
  DeviceTensor,
  disposeAll,
  Module,
  moveResult,
  MtcError,
  pinnedArray,
  pinnedTensor,
  prefetch,
  prepareCopy,
  prepareCopyInto,
  startArenaCopy,
  startCopy,
  Stream,
  Tensor,
  ToDevice,
  withStream,
} from "../../ts/mod.ts";
import { hasOwners } from "../../ts/ffi/owner.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertSame, assertThrows, assertRejects, test } from "./harness.ts";

const disposedTest = (name: string, fn: () => void | Promise<void>) => test(`use after dispose: ${name}`, fn, { skip: skipWithoutDriver });

const RELEASED = "pinned memory was released (dispose(), releaseHostOutput, disposeAll, or its arena's reset() or dispose())";

/** Fails unless `fn` throws an MtcError with MTC_ERR_INVALID_STATE whose message has `includes` (and path `path`, when given). */
function invalidState(fn: () => unknown, includes: string, path?: string): void {
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.code, "MTC_ERR_INVALID_STATE", e.message);
  if (path !== undefined) assertSame(e.path, path, e.message);
}

/** A DeviceTensor of [4] float32 on `device`, disposed. */
function disposedOn(device: "cuda:0" | "cuda:1") {
  const t = DeviceTensor.zeros([4], "float32", device);
  t.dispose();
  return t;
}

disposedTest("prepared copies: a sample or a batch holding a disposed DeviceTensor or released pinned memory", () => {
  invalidState(() => prepareCopy({ x: disposedOn("cuda:1") }, "cuda:0"), "this DeviceTensor was disposed", ".x");
  // A batch against a sample of the same kind: a tensor on another device (copied) and one on the target (placed).
  const live1 = DeviceTensor.zeros([4], "float32", "cuda:1");
  const live0 = DeviceTensor.zeros([4], "float32", "cuda:0");
  const pinned = pinnedTensor("float32", [4]);
  using prepared = prepareCopy({ a: live1, b: live0, c: pinned }, "cuda:0");
  const fresh = pinnedTensor("float32", [4]);
  invalidState(() => prepared.start({ a: disposedOn("cuda:1"), b: live0, c: fresh }), "this DeviceTensor was disposed", ".a");
  invalidState(() => prepared.start({ a: live1, b: disposedOn("cuda:0"), c: fresh }), "this DeviceTensor was disposed", ".b");
  const gone = pinnedTensor("float32", [4]);
  gone.dispose();
  invalidState(() => prepared.start({ a: live1, b: live0, c: gone }), RELEASED, ".c");
  // copyInto's prepared form: a destination disposed.
  const destination = { y: DeviceTensor.zeros([4], "float32", "cuda:0") };
  using into = prepareCopyInto({ y: new Float32Array(4) }, destination);
  destination.y.dispose();
  invalidState(() => into.start({ y: new Float32Array(4) }), "the destination DeviceTensor was disposed", ".y");
  disposeAll([live1, live0, pinned, fresh]);
});

disposedTest("arenas: consolidate, twin and startArenaCopy after a dispose or a reset", async () => {
  const arena = Arena.create(1 << 16);
  invalidState(() => arena.consolidate({ x: disposedOn("cuda:0") }), "this DeviceTensor was disposed", ".x");
  const gone = pinnedTensor("float32", [4]);
  gone.dispose();
  invalidState(() => arena.consolidate({ y: gone }), RELEASED, ".y");
  const leaf = arena.tensor("float32", [4]);
  const onDevice = await startArenaCopy(arena, "cuda:0");
  await arena.reset();
  invalidState(() => arena.twin(onDevice, leaf), RELEASED);
  arena.dispose();
  invalidState(() => arena.twin(onDevice, leaf), "Arena.twin: the arena was disposed");
  invalidState(() => arena.tensor("float32", [4]), "the arena was disposed");
  invalidState(() => startArenaCopy(arena, "cuda:0"), "the arena was disposed");
  await assertRejects(() => arena.reset(), MtcError, "the arena was disposed");
  onDevice.dispose();
});

disposedTest("ToDevice, prefetch, withStream, a kernel's argument and moveResult", async () => {
  invalidState(() => new ToDevice("cuda:1", "cuda:0").forward({ x: disposedOn("cuda:1") }), "this DeviceTensor was disposed", ".x");
  const loop = prefetch([{ x: disposedOn("cuda:0") }], "cpu");
  const e = await assertRejects(() => loop.next(), MtcError, "this DeviceTensor was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  const stream = Stream.create("cuda:0");
  stream.dispose();
  invalidState(() => withStream(stream, () => 1), "was disposed");
  using live = Stream.create("cuda:0");
  using module = Module.load(KERNELS_PTX, "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  invalidState(() => addOne.launch({ stream: live, grid: 1, block: 4 }, [disposedOn("cuda:0"), 4]), "the tensor was disposed");
  if (hasOwners()) {
    invalidState(() => moveResult({ x: disposedOn("cuda:0") }), "the DeviceTensor was disposed", ".x");
    const gone = pinnedTensor("float32", [4]);
    gone.dispose();
    invalidState(() => moveResult({ y: gone }), "it was moved already, or given back", ".y");
  }
  // Host memory of your own is never disposed: a plain Tensor is copied as ever.
  const back = await startCopy({ t: new Tensor(new Float32Array(4), [4]) }, "cuda:0");
  disposeAll(back);
});

disposedTest("startCopy: pinned memory released by a getter read later in the batch", () => {
  const pinned = pinnedArray("float32", 8);
  const batch = {
    a: pinned,
    get b() {
      disposeAll(pinned);
      return new Float32Array(8);
    },
  };
  invalidState(() => startCopy(batch, "cuda:0"), "its pinned memory was released", ".a");
});
