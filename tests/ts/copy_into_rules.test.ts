// The rules copyInto keeps, through the emulated driver (two devices), in
// both runtimes:
// - aliasing is refused before anything is copied, naming both leaves: a
//   destination that is another leaf's source (a swap, a chain, one shared
//   byte), on the host and on one GPU, views into one block and blocks of
//   their own;
// - host destinations are written only inside the handle's ready(), get()
//   or await: never at garbage collection or on another copy's behalf; a
//   destination detached (or a pinned output released) in flight is an
//   MtcError naming it, and nothing is written;
// - two copies into one destination take effect in submission order,
//   whatever path each took and whatever order they are awaited in;
// - a pinned host output released while a copy reads or writes it stays
//   out of the pool until that copy is over.
// Skipped, saying so, when MTC_CUDA_DRIVER is unset.
import {
  copyInto,
  type DeviceTensor,
  disposeAll,
  isPinnedHostOutput,
  MtcError,
  poolStats,
  releaseHostOutput,
  startCopy,
  Stream,
  withStream,
} from "../../ts/mod.ts";
import { canCollectGarbage, collectGarbage, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertThrows, test } from "./harness.ts";

const skip = skipWithoutDriver;
const rule = (name: string, fn: () => void | Promise<void>) => test(`copyInto rules: ${name}`, fn, { skip });

function filled(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = seed * 1000 + i;
  return a;
}

function bytes(v: ArrayBufferView): number[] {
  return Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
}

/** The aliasing cases over leaves x, y, z (each 16 floats) of one kind of memory. */
function aliasingCases<T>(x: T, y: T, z: T): [string, Record<string, T>, Record<string, T>, RegExp][] {
  return [
    ["a swap", { a: x, b: y }, { a: y, b: x }, /^\.(a: .*overlaps the source of \.b|b: .*overlaps the source of \.a) /],
    ["a chain", { a: x, b: y }, { a: y, b: z }, /^\.a: .*overlaps the source of \.b /],
  ];
}

rule("a destination that is another leaf's source on the host is refused, naming both, and nothing is copied", () => {
  const buffer = new ArrayBuffer(3 * 64 + 4);
  const x = new Float32Array(buffer, 0, 16), y = new Float32Array(buffer, 64, 16), z = new Float32Array(buffer, 128, 16);
  x.set(filled(16, 1));
  y.set(filled(16, 2));
  z.set(filled(16, 3));
  const before = bytes(new Uint8Array(buffer));
  for (const useBackgroundThread of [true, false]) {
    for (const [name, source, destination, message] of aliasingCases(x, y, z)) {
      const e = assertThrows(() => copyInto(source, destination, { useBackgroundThread }), MtcError);
      assert(message.test(e.message), `${name}: ${e.message}`);
      assertEquals(bytes(new Uint8Array(buffer)), before, name);
    }
    // One shared byte: b's destination ends one byte into a's source.
    const a = new Uint8Array(buffer, 0, 64), other = new Uint8Array(buffer, 192, 4);
    const e = assertThrows(() => copyInto({ a, b: other }, { a: new Uint8Array(64), b: new Uint8Array(buffer, 61, 4) }), MtcError);
    assert(/^\.b: .*overlaps the source of \.a /.test(e.message), e.message);
    // Apart by one byte: copied.
    const out = new Uint8Array(64);
    copyInto({ a, b: other }, { a: out, b: new Uint8Array(buffer, 64, 4) }, { useBackgroundThread }).get();
    assertEquals(bytes(out), before.slice(0, 64));
    assertEquals(bytes(new Uint8Array(buffer, 64, 4)), before.slice(192, 196));
    new Uint8Array(buffer).set(before);
  }
});

for (const packed of [true, false]) {
  rule(`a destination that is another leaf's source on one GPU is refused (${packed ? "views into one block" : "blocks of their own"})`, async () => {
    const host = { x: filled(16, 1), y: filled(16, 2), z: filled(16, 3) };
    const onGpu = await startCopy(host, "cuda:0", { packCpuTensors: packed }) as unknown as Record<string, DeviceTensor>;
    assert((onGpu.x!.block === onGpu.y!.block) === packed, "layout as asked");
    const { x, y, z } = onGpu as { x: DeviceTensor; y: DeviceTensor; z: DeviceTensor };
    for (const useBackgroundThread of [true, false]) {
      for (const [name, source, destination, message] of aliasingCases(x, y, z)) {
        const e = assertThrows(() => copyInto(source, destination, { useBackgroundThread }), MtcError);
        assert(message.test(e.message), `${name}: ${e.message}`);
      }
    }
    // Mixed sources: a host leaf and a cuda:0 leaf whose destination is x, read by the other leaf.
    const e = assertThrows(() => copyInto({ a: x, b: filled(16, 9) }, { a: z, b: x }), MtcError);
    assert(/^\.b: .*overlaps the source of \.a /.test(e.message), e.message);
    assertEquals(Array.from(x.toHost() as Float32Array), Array.from(host.x), "x untouched");
    assertEquals(Array.from(y.toHost() as Float32Array), Array.from(host.y), "y untouched");
    // A real swap goes through a third buffer.
    const spare = await startCopy({ t: new Float32Array(16) }, "cuda:0") as unknown as { t: DeviceTensor };
    await copyInto({ t: x }, spare);
    await copyInto({ x: y }, { x });
    await copyInto({ y: spare.t }, { y });
    assertEquals(Array.from(x.toHost() as Float32Array), Array.from(host.y));
    assertEquals(Array.from(y.toHost() as Float32Array), Array.from(host.x));
    disposeAll([onGpu, spare]);
  });
}

rule("GPU -> host: the destination is written by ready(), not when the copy completes nor at garbage collection", async () => {
  const source = filled(4096, 4);
  const onGpu = await startCopy({ v: source }, "cuda:0") as unknown as { v: DeviceTensor };
  await withCopyDelay(20_000, async () => {
    // Completed on the device, still unwritten until ready() says so.
    const out = new Float32Array(4096);
    const h = copyInto(onGpu, { v: out });
    await tick(60);
    assert(out.every((v) => v === 0), "written before ready()");
    assert(h.ready(), "the copy is over");
    assertEquals(Array.from(out), Array.from(source));
    h.dispose(); // ready() keeps the plan until get(), dispose() or collection
    // Dropped without waiting: never written, also once its backstop released it.
    const dropped = new Float32Array(4096);
    const plans = poolStats().plansLive;
    (() => void copyInto(onGpu, { v: dropped }))();
    await tick(60);
    if (canCollectGarbage()) {
      for (let k = 0; k < 100 && poolStats().plansLive > plans; k++) {
        collectGarbage();
        await tick(20);
      }
      assertEquals(poolStats().plansLive, plans, "the dropped handle's plan was released");
    }
    assert(dropped.every((v) => v === 0), "written by a dropped handle");
    // Host -> host likewise: written by get(), not by the library's thread.
    const hostOut = new Float32Array(4096);
    const hh = copyInto({ v: source }, { v: hostOut });
    await tick(30);
    assert(hostOut.every((v) => v === 0), "host -> host written before get()");
    hh.get();
    assertEquals(Array.from(hostOut), Array.from(source));
    // Disposed: never written.
    const disposed = new Float32Array(4096);
    copyInto(onGpu, { v: disposed }).dispose();
    assert(disposed.every((v) => v === 0), "written by dispose()");
  });
  disposeAll(onGpu);
});

rule("two copies into one destination leave the later one's bytes, whatever path each took and whatever the await order", async () => {
  const first = filled(256, 1), second = filled(256, 2);
  const onGpu = await startCopy({ a: first, b: second }, "cuda:0") as unknown as { a: DeviceTensor; b: DeviceTensor };
  const target = await startCopy({ v: new Float32Array(256) }, "cuda:0") as unknown as { v: DeviceTensor };
  const stream = Stream.create("cuda:0");
  let wrong = 0;
  for (let round = 0; round < 60; round++) {
    // Device destination: a background copy, then one on the calling thread (or inside withStream).
    const big = filled(1 << 18, round);
    const h1 = copyInto({ v: big.subarray(0, 256) }, target, { useBackgroundThread: true });
    const h2 = round % 2 === 0
      ? copyInto({ v: second }, target, { useBackgroundThread: false })
      : withStream(stream, () => copyInto({ v: second }, target));
    await h2;
    await h1;
    if ((target.v.toHost() as Float32Array)[0] !== second[0]) wrong++;
    // Host destination: awaited in reverse order, from the GPU and from the host.
    const out = new Float32Array(256);
    const g1 = copyInto({ v: onGpu.a }, { v: out });
    const g2 = copyInto({ v: onGpu.b }, { v: out });
    await g2;
    await g1;
    if (out[0] !== second[0]) wrong++;
    const fromHost = new Float32Array(256);
    const k1 = copyInto({ v: first }, { v: fromHost });
    const k2 = copyInto({ v: second }, { v: fromHost }, { useBackgroundThread: false });
    k2.get();
    k1.get();
    if (fromHost[0] !== second[0]) wrong++;
  }
  assertEquals(wrong, 0, "rounds that ended with the earlier copy's bytes");
  stream.dispose();
  disposeAll([onGpu, target]);
});

rule("a destination detached in flight is an MtcError naming it, and nothing is written", async () => {
  const onGpu = await startCopy({ a: filled(1024, 5), b: filled(1024, 6) }, "cuda:0") as unknown as Record<string, DeviceTensor>;
  await withCopyDelay(20_000, async () => {
    const a = new Float32Array(1024), b = new Float32Array(1024);
    const h = copyInto(onGpu, { a, b });
    const moved = b.buffer.transfer();
    await assertRejects(() => Promise.resolve(h), MtcError, "detached");
    const e = assertThrows(() => h.get(), MtcError, ".b: ");
    assert(e.code === "MTC_ERR_INVALID_STATE", e.code);
    assert(new Float32Array(moved).every((v) => v === 0), "the moved buffer was written");
    assert(a.every((v) => v === 0), "a was written although the copy failed");
  });
  disposeAll(onGpu);
});

rule("a pinned host output released in flight: as a destination it fails the copy, as a source it is still read whole; another copy's output is untouched", async () => {
  const data = filled(2048, 7);
  const onGpu = await startCopy({ v: data }, "cuda:0") as unknown as { v: DeviceTensor };
  const zeros = await startCopy({ v: new Float32Array(2048) }, "cuda:0");
  const pinned = await startCopy(zeros, "cpu") as unknown as { v: Float32Array };
  assert(isPinnedHostOutput(pinned.v), "a pinned output");
  await withCopyDelay(20_000, async () => {
    const h = copyInto(onGpu, pinned);
    releaseHostOutput(pinned);
    const innocent = await startCopy(onGpu, "cpu") as { v: Float32Array };
    await assertRejects(() => Promise.resolve(h), MtcError, ".v: ");
    assertEquals(Array.from(innocent.v), Array.from(data), "another copy's output");
    // As a source of a copy to the GPU, released while it is read.
    const source = await startCopy(onGpu, "cpu") as unknown as { v: Float32Array };
    assert(isPinnedHostOutput(source.v), "a pinned output");
    const up = startCopy(source, "cuda:0");
    releaseHostOutput(source);
    const minusOnes = await startCopy({ v: new Float32Array(2048).fill(-1) }, "cuda:0");
    const other = await startCopy(minusOnes, "cpu") as unknown as { v: Float32Array };
    const landed = await up as unknown as { v: DeviceTensor };
    assertEquals(Array.from(landed.v.toHost() as Float32Array), Array.from(data));
    assert(other.v.every((v) => v === -1), "the other copy's output changed");
    disposeAll([landed, innocent, other, minusOnes]);
  });
  disposeAll([onGpu, zeros]);
});

rule("a host side's own length, byteLength, buffer or subarray is not believed: no write past it, no read past it", async () => {
  const onGpu = await startCopy({ v: filled(2, 8) }, "cuda:0") as unknown as { v: DeviceTensor };
  // A destination of 2 floats inside a larger buffer, claiming 16.
  const whole = new Float32Array(16).fill(-1);
  const dst = whole.subarray(0, 2);
  for (const [name, value] of [["length", 16], ["byteLength", 64], ["buffer", new ArrayBuffer(64)]] as const) {
    Object.defineProperty(dst, name, { value, configurable: true });
  }
  await copyInto(onGpu, { v: dst });
  assertEquals(Array.from(whole.subarray(0, 2)), [8000, 8001]);
  assert(whole.subarray(2).every((v) => v === -1), "written past the destination");
  // Sixteen floats into it: refused by its real shape, nothing written.
  const sixteen = await startCopy({ v: filled(16, 9) }, "cuda:0") as unknown as { v: DeviceTensor };
  assertThrows(() => copyInto(sixteen, { v: dst }), MtcError, "shape");
  assert(whole.subarray(2).every((v) => v === -1), "written past the destination");
  disposeAll(sixteen);
  // A source claiming more bytes than it has: copied by what it holds, or refused; never read past.
  const src = new Float32Array([1, 2]);
  Object.defineProperty(src, "byteLength", { value: 64 });
  const out = new Float32Array(2);
  await copyInto({ v: src }, { v: out });
  assertEquals(Array.from(out), [1, 2]);
  disposeAll(onGpu);
});

rule("a getter that disposes a DeviceTensor the walk already read (a destination of copyInto, a source of startCopy) frees nothing the copy uses", async () => {
  const data = filled(64, 3);
  const before = poolStats().blocksLive;
  for (const useBackgroundThread of [true, false]) {
    const target = await startCopy({ v: new Float32Array(64) }, "cuda:0") as unknown as { v: DeviceTensor };
    const spare = await startCopy({ v: new Float32Array(64) }, "cuda:0") as unknown as { v: DeviceTensor };
    // copyInto: the source's later key disposes the first destination, already walked.
    const source = { v: data, get w() { target.v.dispose(); return filled(64, 4); } };
    const h = copyInto(source, { v: target.v, w: spare.v }, { useBackgroundThread });
    assert(target.v.disposed, "the getter ran");
    await h; // the block lived until the copy was over
    // startCopy: a later leaf's getter disposes an earlier DeviceTensor source.
    const onGpu = await startCopy({ a: data }, "cuda:0") as unknown as { a: DeviceTensor };
    const batch = { a: onGpu.a, get b() { onGpu.a.dispose(); return new Float32Array(4); } };
    const back = await startCopy(batch, "cpu", { useBackgroundThread }) as unknown as { a: Float32Array };
    assertEquals(Array.from(back.a), Array.from(data), "read whole although disposed meanwhile");
    releaseHostOutput(back);
    disposeAll([spare]);
  }
  assertEquals(poolStats().blocksLive, before, "every block given back once the copies were over");
});

rule("user code inside copyInto's walk: a destination it detaches is refused when the bytes would land; a copy it starts into the same destination is superseded by the outer one, submitted after it", async () => {
  const onGpu = await startCopy({ a: filled(16, 1), b: filled(16, 2) }, "cuda:0") as unknown as { a: DeviceTensor; b: DeviceTensor };
  // A later key's getter transfers the destination walked before it.
  const early = new Float32Array(16);
  // Refused when the bytes would land, or at submit where host addresses are read in bulk then (Deno).
  let refused: unknown;
  try {
    await copyInto({ a: onGpu.a, get b() { early.buffer.transfer(); return onGpu.b; } }, { a: early, b: new Float32Array(16) });
  } catch (e) {
    refused = e;
  }
  assert(refused instanceof MtcError && refused.message.startsWith(".a: "), String(refused));
  // A getter that runs another copyInto into the same destination: the outer copy is submitted last, and wins.
  const out = new Float32Array(16);
  let inner: ReturnType<typeof copyInto> | undefined;
  const outer = copyInto({ get v() { inner = copyInto({ v: onGpu.a }, { v: out }); return onGpu.b; } }, { v: out });
  await outer;
  await inner!;
  assertEquals(Array.from(out), Array.from(filled(16, 2)));
  disposeAll(onGpu);
});
