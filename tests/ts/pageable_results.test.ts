// usePinnedStaging: false on a copy to "cpu" gives pageable results, as
// accvlab does: JavaScript-owned arrays, not views of pinned memory, whose
// pinned blocks go back with the copy. The default keeps the zero-copy views.
// Every dtype, packed and unpacked (a leaf above the packing threshold),
// through the emulated driver.
import { type DeviceTensor, disposeAll, isPinnedHostOutput, poolStats, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertSame, test } from "./harness.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";

function sameBytes(got: TypedArray | Tensor, expected: TypedArray | Tensor, what: string): void {
  const a = bytesOf(got);
  const e = bytesOf(expected);
  assertSame(a.length, e.length, `${what}: byte length`);
  for (let k = 0; k < a.length; k++) if (a[k] !== e[k]) assertSame(a[k], e[k], `${what}: byte ${k}`);
}

test("pageable results: usePinnedStaging false gives JavaScript-owned arrays on cpu; the default gives pinned views", async () => {
  const inputs = [...DTYPES.map((dtype, i) => randomLeaf(dtype, [3 + i, 2], 900 + i)), randomLeaf("float32", [300_000], 7)];
  const onGpu = (await startCopy(inputs, "cuda:0")) as DeviceTensor[];
  const before = poolStats().pinnedOutputBytes;
  for (const pinned of [false, true]) {
    const handle = startCopy(onGpu, "cpu", { usePinnedStaging: pinned });
    const back = (await handle) as (TypedArray | Tensor)[];
    handle.dispose();
    for (const [i, leaf] of back.entries()) {
      sameBytes(leaf, inputs[i]!, `usePinnedStaging ${pinned}, leaf ${i}`);
      assertSame(isPinnedHostOutput(leaf), pinned, `usePinnedStaging ${pinned}, leaf ${i}: a view of pinned memory`);
    }
    if (!pinned) assertSame(poolStats().pinnedOutputBytes, before, "pageable results hold no pinned output once the copy is disposed");
    else assert(poolStats().pinnedOutputBytes > before, "pinned results hold their blocks");
    disposeAll(back);
  }
  disposeAll(onGpu);
}, { skip: skipWithoutDriver });
