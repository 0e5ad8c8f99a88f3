// The pinned pool's limit, through the emulated driver: staging never holds
// more pinned memory than the limit (poolStats().pinnedHighWaterBytes), even
// with 10,000 copies started and none awaited; a leaf larger than the limit
// goes through it in pieces; pinned host outputs, which their owner may keep,
// never make staging wait; every copy stays byte-exact and nothing hangs.
// Each test sets the limit and puts the one it found back.
import { type AsyncCopyHandle, cudaDeviceCount, type DeviceTensor, disposeAll, MtcError, poolStats, setPinnedPoolLimit, startCopy, trimPools, type TypedArray, warmUp } from "../../ts/mod.ts";
import { skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertSame, assertThrows, note, runner, test } from "./harness.ts";
import { assertPoolsBack, checkBytes, patterned, poolMark, Tally } from "./fixtures/checks.ts";
import { runScript } from "./fixtures/spawn.ts";

const tally = new Tally("pinned_limit");
const skip = skipWithoutDriver;
const MIB = 2 ** 20;

/** Runs `fn` with the pinned pool's limit at `bytes`, then puts the previous limit back. */
async function withLimit(bytes: number, fn: () => void | Promise<void>): Promise<void> {
  const previous = poolStats().pinnedLimitBytes;
  assert(previous >= MIB, `the library reports its limit (${previous})`);
  setPinnedPoolLimit(bytes);
  try {
    await fn();
  } finally {
    setPinnedPoolLimit(previous);
  }
}

function limitTest(name: string, fn: () => void | Promise<void>, timeout = 120_000): void {
  test(`pinned limit: ${name}`, async () => {
    const mark = poolMark();
    await fn();
    assertPoolsBack(mark, name);
    tally.cases++;
  }, { skip, timeout });
}

function checkHighWater(limit: number, what: string): void {
  const s = poolStats();
  assertSame(s.pinnedLimitBytes, limit, `${what}: the limit in force`);
  assert(s.pinnedHighWaterBytes <= limit, `${what}: pinned staging + idle reached ${s.pinnedHighWaterBytes} bytes, above the limit ${limit}`);
}

limitTest("10,000 copies started without awaiting, limit 8 MiB: byte-exact, staging never above the limit", async () => {
  const LIMIT = 8 * MIB;
  const COPIES = 10_000;
  await withLimit(LIMIT, async () => {
    const waitsBefore = poolStats().pinnedLimitWaits;
    const inputs: TypedArray[][] = [];
    const handles: AsyncCopyHandle<unknown>[] = [];
    await withCopyDelay(20, () => {
      for (let i = 0; i < COPIES; i++) {
        const leaves: TypedArray[] = [patterned(Float32Array, 1 + (i % 50), i), patterned(Uint8Array, 3 + (i % 300), i + 1)];
        if (i % 2_500 === 1) leaves.push(patterned(Float32Array, (20 * MIB) / 4, i + 2)); // larger than the limit: in pieces
        inputs.push(leaves);
        handles.push(startCopy(leaves, i % 2 === 0 ? "cuda:0" : "cuda:1") as AsyncCopyHandle<unknown>);
      }
    });
    const started = poolStats();
    note(`pinned limit (${runner}): ${COPIES} copies started; staging lent now ${started.pinnedStagingBytes} bytes, high water ${started.pinnedHighWaterBytes}`);
    const outputs = handles.map((h) => {
      const out = h.get() as DeviceTensor[];
      h.dispose();
      return out;
    });
    checkHighWater(LIMIT, "after the copies");
    // Back in one copy to the host (a gather, whose segment tables are staging too).
    const back = startCopy(outputs, "cpu").get() as TypedArray[][];
    for (let i = 0; i < COPIES; i++) {
      inputs[i]!.forEach((leaf, k) => checkBytes(back[i]![k]!, leaf, tally, `copy ${i} leaf ${k}`));
    }
    disposeAll([back, outputs]);
    const s = poolStats();
    checkHighWater(LIMIT, "after reading them back");
    assert(s.pinnedLimitWaits > waitsBefore, "staging reached the limit and waited (the test exercised it)");
    assertSame(s.pinnedStagingBytes, 0, "no staging lent once every copy is over");
    note(`pinned limit (${runner}): high water ${s.pinnedHighWaterBytes} of ${LIMIT} bytes; ${s.pinnedLimitWaits - waitsBefore} staging requests waited at the limit`);
    tally.copies += COPIES + 1;
  });
});

limitTest("a leaf of 24 MiB through a 4 MiB limit, with and without a copy in flight: exact", async () => {
  const LIMIT = 4 * MIB;
  await withLimit(LIMIT, async () => {
    const big = patterned(Uint8Array, 24 * MIB, 9);
    const strided = patterned(Float64Array, (6 * MIB) / 8, 10);
    await withCopyDelay(200, async () => {
      const first = startCopy({ big }, "cuda:0");
      const second = startCopy({ strided, big }, "cuda:1", { useBackgroundThread: false });
      for (const [h, expected] of [[first, { big }], [second, { strided, big }]] as const) {
        const out = (await h) as Record<string, DeviceTensor>;
        h.dispose();
        for (const [key, leaf] of Object.entries(expected)) checkBytes(out[key]!.toHost(), leaf, tally, key);
        disposeAll(out);
      }
    });
    checkHighWater(LIMIT, "24 MiB leaves");
    tally.copies += 5;
  });
});

limitTest("pinned host outputs held past the limit never make staging wait for them", async () => {
  const LIMIT = 2 * MIB;
  await withLimit(LIMIT, () => {
    const onGpu = startCopy(Array.from({ length: 8 }, (_, i) => patterned(Uint8Array, MIB, i)), "cuda:0").get();
    const held = [];
    for (let i = 0; i < 4; i++) held.push(startCopy(onGpu, "cpu").get()); // 32 MiB of pinned outputs, kept
    assert(poolStats().pinnedOutputBytes >= 32 * MIB, `outputs held: ${poolStats().pinnedOutputBytes}`);
    const batch = Array.from({ length: 40 }, (_, i) => patterned(Float32Array, 64 * 1024, i));
    const h = startCopy(batch, "cuda:1");
    const out = h.get();
    h.dispose();
    out.forEach((t, i) => checkBytes(t.toHost(), batch[i]!, tally, `leaf ${i}`));
    checkHighWater(LIMIT, "with outputs held");
    disposeAll([held, onGpu, out]);
    tally.copies += 46;
  });
});

limitTest("setPinnedPoolLimit checks its argument", () => {
  for (const bad of [0, MIB - 1, 2 ** 50 + 1, 1.5 * MIB + 0.5, Number.NaN, -MIB]) {
    assertThrows(() => setPinnedPoolLimit(bad), MtcError, "from 1 MiB to 1 PiB");
  }
});

limitTest("warmUp leaves the staging a copy needs idle in the pool, within the limit", async () => {
  trimPools();
  const before = poolStats();
  warmUp("cuda:0", { pinnedBytes: 3 * 4 * MIB, pinnedBufferBytes: 4 * MIB, deviceBytes: 16 * MIB });
  const warm = poolStats();
  assertSame(warm.pinnedAllocations - before.pinnedAllocations, 3, "warmUp allocates three 4 MiB buffers");
  assert(warm.pinnedBytesCached >= 12 * MIB, `they stay idle in the pool (${warm.pinnedBytesCached} bytes)`);
  const leaf = patterned(Uint8Array, 10 * MIB, 77);
  const onGpu = await startCopy([leaf], "cuda:0", { stagingPieceBytes: 4 * MIB });
  assertSame(poolStats().pinnedAllocations, warm.pinnedAllocations, "the first copy allocates no pinned memory");
  checkBytes(onGpu[0]!.toHost(), leaf, tally, "after warmUp");
  disposeAll(onGpu);
  await withLimit(16 * MIB, () => {
    warmUp("cuda", { pinnedBytes: 64 * MIB, pinnedBufferBytes: 4 * MIB });
    const s = poolStats();
    assert(s.pinnedBytesCached <= 16 * MIB && s.pinnedBytesCached >= 4 * MIB, `at the limit warmUp keeps what fits (${s.pinnedBytesCached})`);
  });
  assertThrows(() => warmUp("cpu"), MtcError, "name a CUDA device");
  assertThrows(() => warmUp("cuda:0", { pinnedBytes: -1 }), MtcError, "pinnedBytes must be a whole number");
  assertThrows(() => warmUp("cuda:7"), MtcError, "cuda:7");
  tally.copies += 1;
});

test("pinned limit: MTC_PINNED_LIMIT sets the limit a process starts with", async () => {
  const child = new URL("./fixtures/print_pool_stats.ts", import.meta.url).pathname;
  for (const [value, expected] of [["3m", 3 * MIB], ["2097152", 2 * MIB], ["12k", 0], ["lots", 0]] as const) {
    const r = await runScript(child, [], { MTC_PINNED_LIMIT: value });
    assertSame(r.code, 0, `child with MTC_PINNED_LIMIT=${value}: ${r.stderr}`);
    const limit = Number(/pinnedLimitBytes (\d+)/.exec(r.stdout)?.[1]);
    // Below 1 MiB or malformed: ignored, the default applies (at most 2 GiB, at least 1 MiB).
    if (expected === 0) assert(limit >= MIB && limit <= 2 * 1024 * MIB && limit !== 12 * 1024, `MTC_PINNED_LIMIT=${value} ignored: ${limit}`);
    else assertSame(limit, expected, `MTC_PINNED_LIMIT=${value}`);
  }
  tally.cases++;
}, { skip });

test("pinned limit: totals: every case ran, every copy checked", () => {
  assert(cudaDeviceCount() >= 2, "the copies use cuda:0 and cuda:1");
  tally.check(runner, { cases: 6, copies: 10_053, bytes: 164_015_704 });
}, { skip });
