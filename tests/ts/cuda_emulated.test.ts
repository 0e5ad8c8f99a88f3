// Copies to "cuda:N" through the emulated driver (MTC_CUDA_DRIVER pointing at
// zig-out/lib/libfakecuda.so): device memory is host memory, so everything
// but speed can be checked here. Skipped, saying so, when MTC_CUDA_DRIVER is unset.
import {
  AsyncCopyHandle,
  cudaDeviceCount,
  type Device,
  type HostLeaf,
  DeviceTensor,
  disposeAll,
  MtcError,
  poolStats,
  releaseHostOutput,
  startCopy,
  Tensor,
} from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { checkLibraryStaysMapped } from "./mapping.ts";
import { canCollectGarbage, collectGarbage, fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, runner, test } from "./harness.ts";
import { bytesOf, DTYPES, elementSize, randomLeaf } from "./random_tensors.ts";

const skip = skipWithoutDriver;
/** A test; `needs` says why it cannot run here (it is then reported as skipped). */
const cudaTest = (name: string, fn: () => void | Promise<void>, sanitize = true, needs?: string) =>
  test(`emulated cuda: ${name}`, fn, { skip: skip ?? needs, sanitize });

const NEEDS_TWO = skip === undefined && cudaDeviceCount() < 2 ? "needs two devices (FAKE_CUDA_DEVICE_COUNT=2)" : undefined;
const NEEDS_GC = canCollectGarbage() ? undefined : "needs a way to force collections (Deno: --v8-flags=--expose-gc)";
const NEEDS_HOOKS = fakeDriver() === null ? "needs libfakecuda's hooks (a copy delay): MTC_CUDA_DRIVER names another driver" : undefined;


cudaTest("a device exists", () => {
  assert(cudaDeviceCount() >= 1);
});

cudaTest("every dtype round-trips exactly, 1-D and 2-D", () => {
  for (const [i, dtype] of DTYPES.entries()) {
    for (const shape of [[37], [5, 3], []]) {
      const input = randomLeaf(dtype, shape, 100 + i);
      const h = startCopy(input, "cuda:0");
      const onGpu = h.get() as DeviceTensor;
      h.dispose();
      assert(onGpu instanceof DeviceTensor);
      assertEquals(onGpu.shape, shape);
      assertSame(onGpu.dtype, dtype);
      assertSame(onGpu.device, "cuda:0");
      assertSame(onGpu.byteLength, bytesOf(input).length);
      const back = onGpu.toHost();
      // 1-D natural dtypes come back as the same kind of typed array; the rest as Tensors.
      assertSame(back.constructor, input.constructor, `${dtype} ${JSON.stringify(shape)}`);
      assertEquals(bytesOf(back), bytesOf(input), `${dtype} ${JSON.stringify(shape)}`);
      if (back instanceof Tensor) {
        assertEquals(back.shape, shape);
        assertSame(back.dtype, dtype);
      }
      const t = onGpu.toTensor();
      assert(t instanceof Tensor && t.dtype === dtype);
      assertEquals(t.shape, shape);
      assert(bytesOf(back).buffer !== bytesOf(input).buffer, "a fresh ArrayBuffer");
      onGpu.dispose();
    }
  }
});

cudaTest("the example batch goes to the device and back unchanged", async () => {
  const batch = makeExampleBatch(11);
  const onGpu = await startCopy(batch, "cuda:0");
  assert(onGpu[3]!.cams_gt[2]!.depths instanceof DeviceTensor);
  const back = await startCopy(onGpu, "cpu");
  assertEquals(back, batch);
  disposeAll([onGpu, back]);
});

cudaTest("small leaves are packed into one block, each aligned to max(16, element size)", () => {
  const before = poolStats().blocksLive;
  const data = {
    a: new Uint8Array(3),
    b: new Float64Array(5),
    c: new Int16Array(7),
    d: new Tensor(new Uint8Array(1), [1], "bool"),
    e: new BigInt64Array(2),
  };
  const out = startCopy(data, "cuda:0").get();
  const tensors = Object.values(out) as DeviceTensor[];
  for (const t of tensors) {
    assert(t.packed, "packed");
    assertSame(t.block, tensors[0]!.block, "one block");
    assertSame(t.address % Math.max(16, elementSize(t.dtype)), 0, `aligned ${t.address}`);
    assertSame(t.address - t.offset, tensors[0]!.address - tensors[0]!.offset);
  }
  assertSame(new Set(tensors.map((t) => t.address)).size, tensors.length, "distinct addresses");
  assertSame(poolStats().blocksLive, before + 1);
  // The block lives until the last tensor viewing it is disposed.
  for (const t of tensors.slice(1)) t.dispose();
  assertSame(poolStats().blocksLive, before + 1);
  assertEquals(out.a.toHost(), new Uint8Array(3));
  out.a.dispose();
  out.a.dispose();
  assertSame(poolStats().blocksLive, before);
});

cudaTest("minPackedAlignmentBytes, packCpuTensors and packThresholdBytes are honoured", () => {
  const data = [new Uint8Array(3), new Uint8Array(5), new Float32Array(3)];
  const aligned = startCopy(data, "cuda:0", { minPackedAlignmentBytes: 256 }).get();
  for (const t of aligned) assertSame(t.address % 256, 0);
  disposeAll(aligned);
  const unpacked = startCopy(data, "cuda:0", { packCpuTensors: false }).get();
  assert(unpacked.every((t) => !t.packed));
  assertSame(new Set(unpacked.map((t) => t.block)).size, 3);
  disposeAll(unpacked);
  const big = startCopy([new Uint8Array(100), new Uint8Array(300)], "cuda:0", { packThresholdBytes: 200 }).get();
  assert(big[0]!.packed && !big[1]!.packed);
  assertEquals(big[1]!.toHost(), new Uint8Array(300));
  disposeAll(big);
});

cudaTest("every option combination copies correctly", () => {
  const input = [randomLeaf("float32", [1000], 1), randomLeaf("int64", [70000], 2), randomLeaf("uint8", [3], 3)];
  for (const usePinnedStaging of [true, false]) {
    for (const useBackgroundThread of [true, false]) {
      const out = startCopy(input, "cuda:0", { usePinnedStaging, useBackgroundThread, stagingPieceBytes: 4096, stagingThreads: 1 }).get();
      out.forEach((t, i) => assertEquals(bytesOf(t.toHost()), bytesOf(input[i]!)));
      disposeAll(out);
    }
  }
});

cudaTest("subarrays (byteOffset) and empty leaves", () => {
  const base = randomLeaf("float32", [64], 9) as Float32Array;
  const sub = base.subarray(7, 19);
  const empty = new Float32Array(0);
  const out = startCopy({ sub, empty, shapeless: new Tensor(new Int32Array(0), [0, 4]) }, "cuda:0").get();
  assertEquals(out.sub.toHost(), sub.slice());
  assertSame(out.empty.byteLength, 0);
  assertEquals(out.empty.toHost(), new Float32Array(0));
  assertEquals(out.shapeless.toTensor().shape, [0, 4]);
  disposeAll(out);
});

cudaTest("DeviceTensors already on the target are reused (cuda:0 and cuda)", () => {
  const onGpu = startCopy(new Float32Array([1, 2]), "cuda:0").get();
  const again = startCopy({ x: onGpu, n: 1 }, "cuda:0").get();
  assertSame(again.x, onGpu);
  assertSame(startCopy(onGpu, "cuda").get(), onGpu, '"cuda" is the current device, cuda:0');
  onGpu.dispose();
});

cudaTest("device to device copies make new DeviceTensors", () => {
  const input = randomLeaf("float64", [33], 4);
  const a = startCopy(input, "cuda:0").get();
  const b = startCopy(a, "cuda:1").get();
  assert(b !== a);
  assertSame(b.device, "cuda:1");
  a.dispose();
  assertEquals(b.toHost(), input);
  b.dispose();
}, true, NEEDS_TWO);

cudaTest("a device that does not exist is an MtcError", () => {
  const e = assertThrows(() => startCopy([new Float32Array(1)], "cuda:63"), MtcError);
  assertSame(e.code, "MTC_ERR_NO_DEVICE");
});

cudaTest("dispose() without get() frees the outputs", () => {
  const before = poolStats();
  const h = startCopy(makeExampleBatch(1), "cuda:0");
  h.dispose();
  const after = poolStats();
  assertSame(after.blocksLive, before.blocksLive);
  assertSame(after.deviceBytesLive, before.deviceBytesLive);
  assertSame(after.plansLive, before.plansLive);
});

cudaTest("outputs taken by get() outlive the handle", () => {
  const before = poolStats().blocksLive;
  const h = startCopy([new Float32Array([4, 5])], "cuda:0");
  const [t] = h.get();
  h.dispose();
  assertSame(poolStats().blocksLive, before + 1);
  assertEquals(t!.toHost(), new Float32Array([4, 5]));
  t!.dispose();
  assertSame(poolStats().blocksLive, before);
});

cudaTest("a disposed DeviceTensor cannot be copied", () => {
  const t = startCopy(new Float32Array(2), "cuda:0").get();
  t.dispose();
  assert(t.disposed);
  assertThrows(() => t.toHost(), MtcError, "(root): this DeviceTensor was disposed");
  assertThrows(() => startCopy({ a: [t] }, "cpu"), MtcError, ".a[0]: this DeviceTensor was disposed");
});

// Leaking without a way to collect would leave blocks to later tests' counts: skipped then.
cudaTest("the FinalizationRegistry frees blocks of DeviceTensors dropped without dispose", async () => {
  const before = poolStats().blocksLive;
  (() => {
    for (let i = 0; i < 20; i++) startCopy({ a: new Float32Array(4), b: new Uint8Array(1 << 20) }, "cuda:0").get();
  })();
  assert(poolStats().blocksLive > before);
  for (let i = 0; i < 100 && poolStats().blocksLive > before; i++) {
    await tick(5);
    collectGarbage();
  }
  assertSame(poolStats().blocksLive, before);
}, true, NEEDS_GC);

cudaTest("handles dropped without get or dispose release their plans", async () => {
  const before = poolStats().plansLive;
  (() => {
    for (let i = 0; i < 10; i++) startCopy([new Float32Array(8)], "cuda:0");
  })();
  assert(poolStats().plansLive >= before + 10);
  for (let i = 0; i < 100 && poolStats().plansLive > before; i++) {
    await tick(5);
    collectGarbage();
  }
  assertSame(poolStats().plansLive, before);
}, true, NEEDS_GC);

cudaTest("in flight: ready() is false at first, await resolves later without blocking timers", async () => {
  await withCopyDelay(20_000, async () => {
    const input = randomLeaf("float32", [256], 5);
    const t0 = performance.now();
    const h = startCopy({ x: input }, "cuda:0");
    assertSame(h.ready(), false, "a 20 ms copy is not ready at once");
    let timerFired = false;
    setTimeout(() => (timerFired = true), 0);
    const out = await h;
    const elapsed = performance.now() - t0;
    assert(timerFired, "a setTimeout(0) ran while awaiting");
    assert(elapsed >= 15, `resolved after ${elapsed.toFixed(1)} ms`);
    assertSame(h.ready(), true);
    assertSame(h.get(), out);
    assertEquals(out.x.toHost(), input);
    h.dispose();
    out.x.dispose();
  });
}, true, NEEDS_HOOKS);

cudaTest("in flight: get() blocks until done", async () => {
  await withCopyDelay(20_000, () => {
    const t0 = performance.now();
    const h = startCopy([new Int32Array([1, 2, 3])], "cuda:0");
    assertSame(h.ready(), false);
    const [t] = h.get();
    assert(performance.now() - t0 >= 15);
    assertEquals(t!.toHost(), new Int32Array([1, 2, 3]));
    t!.dispose();
    h.dispose();
  });
}, true, NEEDS_HOOKS);

cudaTest("in flight: dispose() waits, frees, and a pending await rejects", async () => {
  const before = poolStats();
  await withCopyDelay(20_000, async () => {
    const h = startCopy(makeExampleBatch(2), "cuda:0");
    const awaited = h.then(() => "resolved", (e: unknown) => e);
    h.dispose(); // on Deno the C release waits for the pending nonblocking wait
    h.dispose();
    const e = await awaited;
    assert(e instanceof MtcError && e.code === "MTC_ERR_INVALID_STATE", String(e));
    assertThrows(() => h.get(), MtcError, "disposed");
  });
  const after = poolStats();
  assertSame(after.plansLive, before.plansLive);
  assertSame(after.blocksLive, before.blocksLive);
}, runner === "bun", NEEDS_HOOKS);

cudaTest("in flight: get() while an await is pending gives the same object", async () => {
  const before = poolStats().plansLive;
  await withCopyDelay(20_000, async () => {
    const h = startCopy({ v: new Float64Array([1.5]) }, "cuda:0");
    const awaited = h.then((v) => v);
    const got = h.get();
    assertSame(await awaited, got);
    assertSame(await h, got);
    h.dispose();
    got.v.dispose();
  });
  assertSame(poolStats().plansLive, before);
}, true, NEEDS_HOOKS);

cudaTest("in flight: `using` disposes handles and tensors", async () => {
  const before = poolStats().blocksLive;
  await withCopyDelay(5_000, async () => {
    using h = startCopy(new Uint16Array([1, 2]), "cuda:0");
    using t = await h;
    assert(t instanceof DeviceTensor && h instanceof AsyncCopyHandle);
  });
  assertSame(poolStats().blocksLive, before);
}, true, NEEDS_HOOKS);

cudaTest("16 handles in flight at once", async () => {
  const inputs = Array.from({ length: 16 }, (_, i) => makeExampleBatch(100 + i));
  const handles = inputs.map((b) => startCopy(b, "cuda:0"));
  const outs = await Promise.all(handles);
  for (let i = 0; i < 16; i++) {
    const back = startCopy(outs[i], "cpu").get();
    assertEquals(back, inputs[i]);
    releaseHostOutput(back);
    handles[i]!.dispose();
    disposeAll(outs[i]);
  }
});

cudaTest("a copy to cpu of host data needs no plan; of device data returns fresh arrays", async () => {
  const onGpu = await startCopy({ a: new Float32Array([1]), keep: "k" }, "cuda:0");
  const back = await startCopy(onGpu, "cpu");
  assertEquals(back, { a: new Float32Array([1]), keep: "k" });
  disposeAll([onGpu, back]);
});

// Type-level check: the result types follow the input (compiles under tsc and deno check).
cudaTest("types: Copied<T, D>", async () => {
  const out = await startCopy({ a: new Float32Array(1), b: [new Tensor(new Int8Array(1), [1])], n: 1 as const }, "cuda:0");
  const a: DeviceTensor = out.a;
  const b: DeviceTensor = out.b[0]!;
  const n: 1 = out.n;
  const back = await startCopy(out, "cpu");
  const host: HostLeaf = back.a; // a DeviceTensor's dtype is only known at run time
  assert(a && b && n === 1 && host);
  disposeAll([out, back]);
  // A device chosen at run time: one structure whose leaves are either kind.
  const device: Device = cudaDeviceCount() > 0 ? "cuda:0" : "cpu";
  const either = await startCopy([{ d: new Float32Array(2) }], device);
  either.forEach((sample) => {
    const leaf: Float32Array | DeviceTensor = sample.d;
    assert(leaf.byteLength === 8);
  });
  disposeAll(either);
});

cudaTest("a Tensor whose buffer was detached is an error naming its path", () => {
  const data = new Float32Array(4);
  const tensor = new Tensor(data, [2, 2]);
  structuredClone(data.buffer, { transfer: [data.buffer] });
  assertThrows(() => startCopy({ x: [tensor] }, "cuda:0"), MtcError, ".x[0]: the Tensor's Float32Array has 0 elements but its shape [2, 2] needs 4");
});

cudaTest("disposeAll disposes every DeviceTensor once, and frees the blocks", async () => {
  const before = poolStats().blocksLive;
  const batch = makeExampleBatch(9);
  const onGpu = await startCopy({ batch, extra: new Map([["x", new Float32Array(300_000)]]), n: 1 }, "cuda:0");
  assert(poolStats().blocksLive > before);
  assertSame(disposeAll(onGpu), 529);
  assertSame(disposeAll(onGpu), 0, "already disposed");
  assertSame(poolStats().blocksLive, before);
});

cudaTest("inputs held only by the handle survive garbage collection while in flight", async () => {
  for (const usePinnedStaging of [true, false]) {
    const out = await withCopyDelay(2_000, async () => {
      // Only the handle references the batch (small typed arrays: Bun's GC-heap case).
      const h = (() => startCopy(makeExampleBatch(77), "cuda:0", { usePinnedStaging }))();
      for (let i = 0; i < 3; i++) {
        collectGarbage();
        await tick(1);
      }
      return await h;
    });
    const back = await startCopy(out, "cpu");
    assertEquals(back, makeExampleBatch(77));
    releaseHostOutput(back);
    disposeAll(out);
  }
}, true, NEEDS_HOOKS ?? NEEDS_GC);

cudaTest("libmtc stays loaded from one test file to the next", () => {
  checkLibraryStaysMapped(); // after this file's copies; library.test.ts checks again
});
