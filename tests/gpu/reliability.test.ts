// Reliability on a CUDA host: the children of tests/ts/exit.test.ts against
// the real driver (scripts that end by an uncaught error, an unhandled
// rejection, ... while copies stage, and buffers resized or transferred while
// their copies stage), and 10,000 copies started without awaiting through a
// pinned pool limited to 8 MiB.
//   node_modules/.bin/bun test tests/gpu/reliability.test.ts
//   node_modules/.bin/deno test --allow-ffi --allow-env --allow-read --allow-run tests/gpu/reliability.test.ts
// With the emulated driver (CI) the child tests are left to tests/ts/exit.test.ts,
// which slows its copies down so that staging lasts; here the real DMA is
// fast, so the children stage 512 MiB.
import { type AsyncCopyHandle, type DeviceTensor, disposeAll, poolStats, setPinnedPoolLimit, startCopy, type TypedArray } from "../../ts/mod.ts";
import { assert, assertSame, note, runner } from "../ts/harness.ts";
import { checkBytes, patterned } from "../ts/fixtures/checks.ts";
import { type ChildLoad, endWhileStaging, type EndMode, type ResizeMode, resizeWhileStaging } from "../ts/fixtures/in_flight.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

/** Where the emulated driver runs the same children. */
const COVERED = "tests/ts/exit.test.ts runs these children on the emulated driver, its copies slowed down";
/** 64 leaves of 8 MiB: staging them takes tens of milliseconds on a real GPU, so the child acts while it runs. */
const END_LOAD: ChildLoad = { leaves: 64, mib: 8, waitMs: 20, vars: {} };
const RESIZE_LOAD: ChildLoad = { leaves: 32, mib: 8, waitMs: 2, vars: {} };
const END_RUNS: Record<EndMode, number> = { "throw": 10, "reject": 10, "top-level": 3, "exit": 3, "signal": 3 };
const RESIZE_RUNS: Record<ResizeMode, number> = { "shrink": 5, "transfer": 5, "grow-shared": 2, "transfer-kept": 2 };

gpuTest("scripts that end while 512 MiB of copies stage print their error and exit 1 (never a signal)", async () => {
  for (const mode of Object.keys(END_RUNS) as EndMode[]) {
    const inFlight = await endWhileStaging(mode, END_RUNS[mode], END_LOAD);
    note(`gpu (${runner}): "${mode}" ${inFlight.length} runs: exit code 1 each, copies in flight when the child counted: ${inFlight.join(", ")}`);
  }
}, { realDriver: COVERED });

gpuTest("buffers shrunk, transferred or grown while their copies stage: no crash, every copy exact", async () => {
  for (const mode of Object.keys(RESIZE_RUNS) as ResizeMode[]) {
    await resizeWhileStaging(mode, RESIZE_RUNS[mode], RESIZE_LOAD);
    note(`gpu (${runner}): "${mode}" while staging, ${RESIZE_RUNS[mode]} runs of ${RESIZE_LOAD.leaves} copies: exact`);
  }
}, { realDriver: COVERED });

gpuTest("10,000 copies started without awaiting through an 8 MiB pinned pool: byte-exact, staging never above 8 MiB", async () => {
  const LIMIT = 8 * 2 ** 20;
  const previous = poolStats().pinnedLimitBytes;
  setPinnedPoolLimit(LIMIT);
  try {
    const waitsBefore = poolStats().pinnedLimitWaits;
    const inputs: TypedArray[][] = [];
    const handles: AsyncCopyHandle<unknown>[] = [];
    for (let i = 0; i < 10_000; i++) {
      const leaves: TypedArray[] = [patterned(Float32Array, 1 + (i % 50), i), patterned(Uint8Array, 3 + (i % 300), i + 1)];
      if (i % 2_500 === 1) leaves.push(patterned(Float32Array, (20 << 20) / 4, i + 2)); // larger than the limit
      inputs.push(leaves);
      handles.push(startCopy(leaves, DEVICE) as AsyncCopyHandle<unknown>);
    }
    const outputs = handles.map((h) => {
      const out = h.get() as DeviceTensor[];
      h.dispose();
      return out;
    });
    const back = (await startCopy(outputs, "cpu")) as TypedArray[][];
    inputs.forEach((leaves, i) => leaves.forEach((leaf, k) => checkBytes(back[i]![k]!, leaf, null, `copy ${i} leaf ${k}`)));
    disposeAll([back, outputs]);
    const s = poolStats();
    assertSame(s.pinnedLimitBytes, LIMIT);
    assert(s.pinnedHighWaterBytes <= LIMIT, `pinned staging + idle reached ${s.pinnedHighWaterBytes} bytes, above ${LIMIT}`);
    assertSame(s.pinnedStagingBytes, 0, "no staging lent once every copy is over");
    note(`gpu (${runner}): 10,000 copies, high water ${s.pinnedHighWaterBytes} of ${LIMIT} bytes, ${s.pinnedLimitWaits - waitsBefore} waits at the limit`);
  } finally {
    setPinnedPoolLimit(previous);
  }
});
