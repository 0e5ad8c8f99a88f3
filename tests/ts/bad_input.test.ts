// Bad input through the emulated driver: each case is either an exact copy or
// an MtcError whose path names the leaf, and afterwards every pool counter
// (plans, blocks, device bytes, pinned bytes in use) is where it was.
// Skipped, saying so, when MTC_CUDA_DRIVER is unset.
import {
  AsyncCopyHandle,
  cudaDeviceCount,
  type CopyOptions,
  type DType,
  DeviceTensor,
  disposeAll,
  MtcError,
  startCopy,
  Tensor,
  type TypedArray,
} from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { canCollectGarbage, fakeDriver, skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, env, note, runner, test } from "./harness.ts";
import {
  assertPoolsBack,
  checkBytes,
  collectUntil,
  patterned,
  poolMark,
  rss,
  Tally,
} from "./fixtures/checks.ts";

const tally = new Tally("bad_input");
const skip = skipWithoutDriver;

/** A test whose pools must be back where they were when it ends. */
/** A case; `needs` says why it cannot run here (it is then reported as skipped). */
function badInput(name: string, fn: () => void | Promise<void>, sanitize = true, needs?: string): void {
  test(`bad input: ${name}`, async () => {
    const mark = poolMark();
    await fn();
    assertPoolsBack(mark, name);
  }, { skip: skip ?? needs, sanitize, timeout: 60_000 });
}

/** Why the in-flight cases cannot run here: they slow copies down through the emulated driver's hooks. */
const NEEDS_HOOKS = fakeDriver() === null ? "needs libfakecuda's hooks (a copy delay): MTC_CUDA_DRIVER names another driver" : undefined;
/** Why the reference cases cannot run here. */
const NEEDS_GC = canCollectGarbage() ? undefined : "needs a way to force collections (Deno: --v8-flags=--expose-gc)";

/** Expects `fn` to throw an MtcError with this code and path, whose message includes `includes`. */
function expectError(fn: () => unknown, code: string, path: string | undefined, includes: string): MtcError {
  const e = assertThrows(() => {
    const result = fn();
    if (result instanceof AsyncCopyHandle) result.dispose(); // not thrown: free it, so later checks are not skewed
  }, MtcError, includes);
  assertSame(e.code, code, `${e.message}: code`);
  assertSame(e.path, path, `${e.message}: path`);
  if (path !== undefined) assert(e.message.startsWith(`${path === "" ? "(root)" : path}: `), e.message);
  tally.cases++;
  return e;
}

/** Copies `leaf` to `device`, then back to the host, and checks every byte; frees everything. */
function roundTrip(leaf: TypedArray | Tensor, device: "cuda:0" | "cuda:1", options?: CopyOptions, what = ""): void {
  const h = startCopy({ leaf }, device, options);
  const onGpu = h.get();
  h.dispose();
  assert(onGpu.leaf instanceof DeviceTensor, `${what}: a DeviceTensor`);
  assertSame(onGpu.leaf.byteLength, leaf.byteLength, `${what}: byteLength`);
  const back = startCopy(onGpu, "cpu").get();
  checkBytes(back.leaf as TypedArray | Tensor, leaf, tally, what);
  disposeAll([onGpu, back]);
  tally.copies += 2;
  tally.cases++;
}

function detach(buffer: ArrayBufferLike): void {
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

// ------------------------------------------------------------- buffers

badInput("a detached array is an error naming its path, bare or in a Tensor", () => {
  for (const device of ["cuda:0", "cuda:1"] as const) {
    const bare = new Float32Array(8);
    detach(bare.buffer);
    expectError(() => startCopy({ a: [new Float32Array(2), bare] }, device), "MTC_ERR_INVALID_ARGUMENT", ".a[1]", "detached");
    const data = new Int32Array(6);
    const tensor = new Tensor(data, [2, 3]);
    detach(data.buffer);
    expectError(
      () => startCopy(new Map([["cam", { boxes: tensor }]]), device),
      "MTC_ERR_INVALID_ARGUMENT",
      '["cam"].boxes',
      "the Tensor's Int32Array has 0 elements but its shape [2, 3] needs 6",
    );
  }
});

badInput("a failed startCopy gives back the share it took of a DeviceTensor source", () => {
  const source = patterned(Float64Array, 16, 3);
  const onOne = startCopy(source, "cuda:1").get();
  const blocks = poolMark().blocksLive;
  const bare = new Uint8Array(4);
  detach(bare.buffer);
  expectError(() => startCopy([onOne, bare], "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", "[1]", "detached");
  assertSame(poolMark().blocksLive, blocks);
  checkBytes(onOne.toHost(), source, tally, "the source still reads back");
  onOne.dispose(); // the pools come back only if the failed copy dropped its share
  tally.copies += 2;
});

/** Host arrays on every kind of buffer: copied as they are at startCopy. */
function bufferKinds(): [string, () => TypedArray][] {
  const Sab = SharedArrayBuffer as unknown as new (n: number, o?: { maxByteLength: number }) => SharedArrayBuffer;
  const fill = (view: TypedArray, seed: number) => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 37 + seed) & 255;
    return view;
  };
  return [
    ["resizable, fixed-length view", () => fill(new Uint8Array(new ArrayBuffer(64, { maxByteLength: 4096 }), 8, 40), 1)],
    ["resizable, length-tracking view", () => fill(new Float32Array(new ArrayBuffer(64, { maxByteLength: 4096 })), 2)],
    ["resizable, grown before the copy", () => {
      const buffer = new ArrayBuffer(16, { maxByteLength: 4096 });
      const view = new Int16Array(buffer, 4);
      buffer.resize(1000);
      assertSame(view.length, 498);
      return fill(view, 3);
    }],
    ["resizable, shrunk before the copy", () => {
      const buffer = new ArrayBuffer(1024, { maxByteLength: 4096 });
      const view = new Uint32Array(buffer);
      buffer.resize(40);
      return fill(view, 4);
    }],
    ["shared", () => fill(new Float64Array(new SharedArrayBuffer(256), 16, 20), 5)],
    ["growable shared", () => {
      const buffer = new Sab(32, { maxByteLength: 1 << 16 });
      assert((buffer as unknown as { growable: boolean }).growable, "a growable SharedArrayBuffer");
      const view = new BigInt64Array(buffer);
      (buffer as unknown as { grow(n: number): void }).grow(200);
      assertSame(view.length, 25);
      return fill(view, 6);
    }],
    ["resizable, 600 KiB (staged, not packed)", () => fill(new Float32Array(new ArrayBuffer(600 << 10, { maxByteLength: 1 << 20 })), 7)],
    ["shared, 600 KiB (staged, not packed)", () => fill(new Uint8Array(new SharedArrayBuffer(700 << 10), 100, 600 << 10), 8)],
  ];
}

badInput("arrays on resizable and shared buffers are copied exactly, packed and staged", () => {
  const optionSets: (CopyOptions | undefined)[] = [undefined, { packCpuTensors: false }, { usePinnedStaging: false }];
  for (const [name, make] of bufferKinds()) {
    for (const options of optionSets) {
      for (const device of ["cuda:0", "cuda:1"] as const) {
        roundTrip(make(), device, options, `${name} → ${device} ${JSON.stringify(options ?? {})}`);
      }
    }
  }
  // A Tensor over a length-tracking view is fine while the buffer keeps its size.
  const buffer = new ArrayBuffer(48, { maxByteLength: 480 });
  const data = new Float32Array(buffer);
  data.set(patterned(Float32Array, 12, 11));
  roundTrip(new Tensor(data, [3, 4]), "cuda:0", undefined, "Tensor over a length-tracking view");
});

badInput("a view out of bounds of its shrunk resizable buffer is an error naming its path", () => {
  const buffer = new ArrayBuffer(64, { maxByteLength: 1024 });
  const view = new Float32Array(buffer, 16, 8);
  buffer.resize(20);
  assertSame(view.byteLength, 0, "out of bounds views read as empty");
  expectError(() => startCopy({ cams: [{ depths: view }] }, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", ".cams[0].depths", "out of bounds");
  const tensor = new Tensor(new Uint16Array(buffer, 0, 4), [2, 2], "bfloat16");
  buffer.resize(4);
  expectError(() => startCopy([[tensor]], "cuda:1"), "MTC_ERR_INVALID_ARGUMENT", "[0][0]", "has 0 elements but its shape [2, 2] needs 4");
});

badInput("a Tensor whose length-tracking data was resized after construction is an error naming its path", () => {
  const buffer = new ArrayBuffer(24, { maxByteLength: 1024 });
  const tensor = new Tensor(new Float32Array(buffer), [2, 3]);
  buffer.resize(32);
  expectError(() => startCopy({ t: tensor }, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", ".t", "has 8 elements but its shape [2, 3] needs 6");
  buffer.resize(8);
  expectError(() => startCopy({ t: tensor }, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", ".t", "has 2 elements but its shape [2, 3] needs 6");
  buffer.resize(24);
  roundTrip(tensor, "cuda:0", undefined, "resized back");
});

badInput("a Tensor whose shape does not match its data cannot be made", () => {
  const cases: [() => unknown, string][] = [
    [() => new Tensor(new Float32Array(6), [4, 2]), "shape [4, 2] has 8 elements but the Float32Array has 6"],
    [() => new Tensor(new Float32Array(6), [-2, -3]), "extents must be integers >= 0"],
    [() => new Tensor(new Float32Array(6), [2.5, 2]), "extents must be integers >= 0"],
    [() => new Tensor(new Float32Array(6), [NaN]), "extents must be integers >= 0"],
    [() => new Tensor(new Float32Array(0), [0, 3, 1]), ""], // fine: zero elements
    [() => new Tensor(new Uint8Array(4), [4], "float32" as DType), "a Uint8Array cannot store dtype float32"],
    [() => new Tensor([1, 2] as unknown as Float32Array, [2]), "Tensor data must be a typed array, got Array"],
    [() => new Tensor(new Float32Array(2), 2 as unknown as number[]), "Tensor shape must be an array of integers"],
  ];
  for (const [make, message] of cases) {
    if (message === "") {
      assert(make() instanceof Tensor);
      continue;
    }
    expectError(make, "MTC_ERR_INVALID_ARGUMENT", undefined, message);
  }
});

// ------------------------------------------------------------- devices

badInput("a disposed DeviceTensor is an error naming its path, whatever the target", () => {
  const t = startCopy(new Float32Array(3), "cuda:1").get();
  t.dispose();
  for (const device of ["cpu", "cuda:0", "cuda:1"] as const) {
    expectError(
      () => startCopy(new Map<string, unknown>([["cams", [{ ok: new Uint8Array(1) }, { depths: t }]]]), device),
      "MTC_ERR_INVALID_STATE",
      '["cams"][1].depths',
      "this DeviceTensor was disposed and cannot be copied",
    );
  }
});

badInput("a device that does not parse is an error naming it", () => {
  const bad: [unknown, string][] = [
    ["gpu", '"gpu"'],
    ["cuda:x", '"cuda:x"'],
    ["cuda:-1", '"cuda:-1"'],
    ["cuda:", '"cuda:"'],
    ["cuda:01", '"cuda:01"'],
    ["CUDA:0", '"CUDA:0"'],
    [" cuda:0", '" cuda:0"'],
    ["cuda:0 ", '"cuda:0 "'],
    ["cuda:1.5", '"cuda:1.5"'],
    ["cuda:99999999999", '"cuda:99999999999"'],
    ["", '""'],
    [3, "3"],
    [0, "0"],
    [null, "null"],
    [undefined, "undefined"],
    [{ device: "cuda:0" }, "[object Object]"],
  ];
  for (const [device, shown] of bad) {
    for (const batch of [[new Float32Array(2)], { nothing: 1 }]) {
      expectError(
        () => startCopy(batch, device as "cpu"),
        "MTC_ERR_INVALID_ARGUMENT",
        undefined,
        `invalid device ${shown}: expected "cpu", "cuda" or "cuda:N"`,
      );
    }
  }
});

badInput("a device index that does not exist is MTC_ERR_NO_DEVICE", () => {
  const count = cudaDeviceCount();
  assert(count >= 1 && count < 8, `the emulated driver has ${count} devices`);
  for (const device of ["cuda:7", `cuda:${count}`] as const) {
    const e = expectError(
      () => startCopy({ a: [new Float32Array(2)], b: new Uint8Array(600 << 10) }, device as "cuda:7"),
      "MTC_ERR_NO_DEVICE",
      undefined,
      `${device} requested but this machine has ${count} CUDA devices`,
    );
    assertSame(e.status, 5);
  }
});

// ------------------------------------------------------------- structure

badInput("a cycle is an error naming where the container is met again", () => {
  const root: { cams: unknown[] } = { cams: [{ depths: new Float32Array(2) }] };
  (root.cams[0] as Record<string, unknown>).back = root;
  expectError(() => startCopy(root, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", ".cams[0].back", "cycle: this container contains itself (it is also at (root))");
  const map = new Map<string, unknown>([["x", new Uint8Array(1)]]);
  const list = [1, { m: map }];
  map.set("loop", list);
  expectError(() => startCopy(list, "cuda:1"), "MTC_ERR_INVALID_ARGUMENT", '[1].m["loop"]', "cycle");
  // Deep inside a 100-level chain: the path is the whole chain.
  const top: Record<string, unknown> = {};
  let node = top;
  for (let i = 0; i < 100; i++) node = (node.next = {}) as Record<string, unknown>;
  node.again = top.next;
  expectError(() => startCopy(top, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", ".next".repeat(100) + ".again", "(it is also at .next)");
});

/** A chain `depth` containers deep (arrays, objects and Maps in turn) around `leaf`; its path, and a reader. */
function deepChain(depth: number, leaf: unknown): { root: unknown; path: string; read(out: unknown): unknown } {
  let inner: unknown = { leaf, n: 7 };
  const segments: string[] = [".leaf"];
  for (let i = depth - 1; i >= 0; i--) {
    if (i % 3 === 0) {
      inner = [0, inner];
      segments.push("[1]");
    } else if (i % 3 === 1) {
      inner = { k: inner };
      segments.push(".k");
    } else {
      inner = new Map([[i, inner]]);
      segments.push(`[${i}]`);
    }
  }
  const path = segments.reverse().join("");
  const read = (out: unknown) => {
    let at = out;
    for (let i = 0; i < depth; i++) {
      if (i % 3 === 0) at = (at as unknown[])[1];
      else if (i % 3 === 1) at = (at as Record<string, unknown>).k;
      else at = (at as Map<number, unknown>).get(i);
    }
    assertSame((at as { n: number }).n, 7, "the number beside the leaf passes through");
    return (at as { leaf: unknown }).leaf;
  };
  return { root: inner, path, read };
}

badInput("nesting 10,000 deep copies, and an error deep inside names the whole path", () => {
  const depth = 10_000;
  const leaf = patterned(Float32Array, 33, 9);
  const chain = deepChain(depth, leaf);
  const h = startCopy(chain.root, "cuda:0");
  const onGpu = h.get();
  h.dispose();
  const copied = chain.read(onGpu);
  assert(copied instanceof DeviceTensor);
  const back = startCopy(onGpu, "cpu").get();
  checkBytes(chain.read(back) as Float32Array, leaf, tally, "10,000 deep");
  assertSame(disposeAll([onGpu, back]), 2, "one DeviceTensor and one pinned block");
  tally.copies += 2;
  tally.cases++;

  const bad = new Uint8Array(5);
  detach(bad.buffer);
  const broken = deepChain(depth, bad);
  const e = expectError(() => startCopy(broken.root, "cuda:1"), "MTC_ERR_INVALID_ARGUMENT", broken.path, "detached");
  assertSame(e.path!.length, broken.path.length);
  assert(e.path!.startsWith("[1].k[2][1].k[5]"), e.path!.slice(0, 40));
});

badInput("many leaves: 1,000,000 to cpu (reused), and a large batch to cuda:0 and back, every byte checked", () => {
  // 1,000,000 to cuda:0 and back takes ~10 s and ~1.2 GB per runtime here
  // (docs/RELIABILITY.md); CI copies 200,000 (MTC_TEST_DEVICE_LEAVES overrides).
  const hostLeaves = 1_000_000;
  const deviceLeaves = Number(env("MTC_TEST_DEVICE_LEAVES") ?? 200_000);
  const make = (n: number) => {
    const leaves = new Array<Uint8Array>(n);
    for (let i = 0; i < n; i++) {
      const a = new Uint8Array(1 + (i % 4));
      for (let j = 0; j < a.length; j++) a[j] = (i >> (j * 8)) & 255;
      leaves[i] = a;
    }
    return leaves;
  };
  let t0 = performance.now();
  const host = make(hostLeaves);
  const same = startCopy(host, "cpu").get();
  assertSame(same.length, hostLeaves);
  for (let i = 0; i < hostLeaves; i++) if (same[i] !== host[i]) throw new Error(`leaf ${i} was not reused`);
  const cpuMs = performance.now() - t0;
  tally.cases++;
  tally.copies++;

  const rss0 = rss();
  t0 = performance.now();
  const leaves = make(deviceLeaves);
  const h = startCopy(leaves, "cuda:0");
  const onGpu = h.get();
  h.dispose();
  const back = startCopy(onGpu, "cpu").get();
  const copyMs = performance.now() - t0;
  const peak = rss();
  let bytes = 0;
  for (let i = 0; i < deviceLeaves; i++) {
    const b = back[i] as Uint8Array;
    const a = leaves[i]!;
    if (b.length !== a.length) throw new Error(`[${i}]: ${b.length} bytes, expected ${a.length}`);
    for (let j = 0; j < a.length; j++) if (b[j] !== a[j]) throw new Error(`[${i}] byte ${j}: ${b[j]} !== ${a[j]}`);
    bytes += a.length;
  }
  tally.bytes += bytes;
  tally.copies += 2;
  tally.cases++;
  assertSame(disposeAll([onGpu, back]), deviceLeaves + 1, "every DeviceTensor, and the one pinned block");
  note(
    `bad input (${runner}): ${hostLeaves} leaves to cpu in ${cpuMs.toFixed(0)} ms; ${deviceLeaves} leaves to cuda:0 and back ` +
      `in ${copyMs.toFixed(0)} ms, RSS +${((peak - rss0) / 2 ** 20).toFixed(0)} MiB`,
  );
}, true);

badInput("zero-length arrays become DeviceTensors of 0 bytes, and come back empty", () => {
  const backing = new ArrayBuffer(32);
  const batch = {
    f: new Float32Array(0),
    i: new BigInt64Array(0),
    atEnd: new Uint8Array(backing, 32, 0),
    t: new Tensor(new Uint8Array(0), [0, 3], "bool"),
    s: new Int16Array(new SharedArrayBuffer(8), 8, 0),
  };
  const blocks = poolMark().blocksLive;
  const h = startCopy(batch, "cuda:0");
  const onGpu = h.get();
  h.dispose();
  assertSame(poolMark().blocksLive, blocks, "no block for empty leaves");
  for (const [key, value] of Object.entries(onGpu)) {
    assert(value instanceof DeviceTensor, key);
    assertSame(value.byteLength, 0, key);
    assertSame(value.address, 0, key);
    assertSame(value.device, "cuda:0", key);
  }
  assertEquals(onGpu.t.shape, [0, 3]);
  const back = startCopy(onGpu, "cpu").get();
  assertEquals(back.f, new Float32Array(0));
  assertEquals(back.i, new BigInt64Array(0));
  assertEquals(back.atEnd, new Uint8Array(0));
  assert(back.t instanceof Tensor && back.t.dtype === "bool" && back.t.data.length === 0);
  assertEquals(back.t.shape, [0, 3]);
  assertEquals(back.s, new Int16Array(0));
  // Mixed with a non-empty leaf.
  const mixed = [new Float32Array(0), patterned(Float32Array, 5, 2), new Uint8Array(0)];
  const out = startCopy(mixed, "cuda:1").get();
  assertSame(out[0]!.byteLength + out[2]!.byteLength, 0);
  checkBytes(out[1]!.toHost(), mixed[1]!, tally, "beside empty leaves");
  disposeAll([onGpu, back, out]);
  tally.cases += 2;
  tally.copies += 4;
});

badInput("views with a byteOffset into a larger buffer copy exactly their bytes", () => {
  const buffer = patterned(Uint8Array, 2 << 20, 4).buffer;
  const views: TypedArray[] = [
    new Uint8Array(buffer, 1, 7),
    new Uint8Array(buffer, 4093, 300),
    new Int16Array(buffer, 2, 3),
    new Float32Array(buffer, 12, 11),
    new BigInt64Array(buffer, 8 * 33, 5),
    new Float64Array(buffer, 8 * 1001, 1),
    new Float32Array(buffer, 4 * 3, (700 << 10) / 4), // staged, not packed
    new Uint8Array(buffer, (2 << 20) - 3, 3), // the buffer's last bytes
  ];
  const optionSets: (CopyOptions | undefined)[] = [undefined, { minPackedAlignmentBytes: 1 }, { packCpuTensors: false }, { usePinnedStaging: false }, { maxPackedChunkBytes: 64 }];
  for (const options of optionSets) {
    for (const device of ["cuda:0", "cuda:1"] as const) {
      const h = startCopy(views, device, options);
      const onGpu = h.get();
      h.dispose();
      const back = startCopy(onGpu, "cpu").get();
      for (let i = 0; i < views.length; i++) checkBytes(back[i]!, views[i]!, tally, `view ${i} ${JSON.stringify(options ?? {})}`);
      disposeAll([onGpu, back]);
      tally.copies += 2;
      tally.cases++;
    }
  }
});

badInput("two leaves over the same bytes are both copied exactly, into independent outputs", () => {
  const base = patterned(Uint8Array, 1024, 6);
  const one = new Uint8Array(base.buffer, 100, 200);
  const overlapping = new Uint8Array(base.buffer, 150, 200);
  const batch = { one, overlapping, again: one, asFloats: new Float32Array(base.buffer, 100, 50) };
  const onGpu = startCopy(batch, "cuda:0").get();
  const addresses = new Set(Object.values(onGpu).map((t) => t.address));
  assertSame(addresses.size, 4, "each place gets its own copy");
  onGpu.one.dispose(); // the others stay readable
  checkBytes(onGpu.again.toHost(), one, tally, "again");
  checkBytes(onGpu.overlapping.toHost(), overlapping, tally, "overlapping");
  checkBytes(onGpu.asFloats.toHost(), one, tally, "as floats");
  // Device → host: the outputs are distinct arrays, writes to one do not show in the other.
  const back = startCopy({ a: onGpu.again, b: onGpu.again }, "cpu").get();
  assert(back.a !== back.b);
  (back.a as Uint8Array)[0] = (one[0]! + 1) & 255;
  checkBytes(back.b, one, tally, "independent host outputs");
  disposeAll([onGpu, back]);
  tally.cases += 2;
  tally.copies += 5;
});

// ------------------------------------------------------------- options

badInput("options out of range are errors naming the option", () => {
  const bad: [unknown, string][] = [
    [{ minPackedAlignmentBytes: 4097 }, "option minPackedAlignmentBytes = 4097 is out of range: an integer in 1..4096"],
    [{ minPackedAlignmentBytes: 0 }, "option minPackedAlignmentBytes = 0 is out of range"],
    [{ minPackedAlignmentBytes: 8192 }, "option minPackedAlignmentBytes = 8192 is out of range"],
    [{ minPackedAlignmentBytes: -16 }, "option minPackedAlignmentBytes = -16 is out of range"],
    [{ minPackedAlignmentBytes: 16.5 }, "option minPackedAlignmentBytes = 16.5 is out of range"],
    [{ minPackedAlignmentBytes: NaN }, "option minPackedAlignmentBytes = NaN is out of range"],
    [{ minPackedAlignmentBytes: "16" }, "option minPackedAlignmentBytes must be a number, got string"],
    [{ minPackedAlignmentBytes: 16n }, "option minPackedAlignmentBytes must be a number, got bigint"],
    [{ maxPackedChunkBytes: 0 }, "option maxPackedChunkBytes = 0 is out of range: 1 byte .. 1 TiB"],
    [{ maxPackedChunkBytes: -1 }, "option maxPackedChunkBytes = -1 is out of range"],
    [{ maxPackedChunkBytes: NaN }, "option maxPackedChunkBytes = NaN is out of range"],
    [{ maxPackedChunkBytes: Infinity }, "option maxPackedChunkBytes = Infinity is out of range"],
    [{ maxPackedChunkBytes: 2 ** 40 + 1 }, "option maxPackedChunkBytes = 1099511627777 is out of range"],
    [{ maxPackedChunkBytes: null }, "option maxPackedChunkBytes must be a number, got object"],
    [{ packThresholdBytes: -1 }, "option packThresholdBytes = -1 is out of range"],
    [{ stagingThreads: 2 ** 32 }, "option stagingThreads = 4294967296 is out of range"],
    [{ stagingPieceBytes: 4095 }, "option stagingPieceBytes = 4095 is out of range: an integer >= 4096"],
    [{ usePinnedStaging: 1 }, "option usePinnedStaging must be a boolean, got number"],
    [{ useBackgroundThread: "yes" }, "option useBackgroundThread must be a boolean, got string"],
    [{ alignment: 16 }, 'unknown option "alignment"'],
    [null, "options must be an object, got null"],
    [16, "options must be an object, got number"],
    ["fast", "options must be an object, got string"],
  ];
  for (const [options, message] of bad) {
    for (const batch of [[new Float32Array(2), new Uint8Array(600 << 10)], { nothing: 1 }]) {
      expectError(() => startCopy(batch, "cuda:0", options as CopyOptions), "MTC_ERR_INVALID_ARGUMENT", undefined, message);
    }
  }
  // The edges of each range are accepted.
  const edges: CopyOptions[] = [
    { minPackedAlignmentBytes: 1 },
    { minPackedAlignmentBytes: 4096 },
    { maxPackedChunkBytes: 1 },
    { packThresholdBytes: 0 },
    { stagingThreads: 1 },
    { stagingPieceBytes: 4096 },
  ];
  for (const options of edges) roundTrip(patterned(Float32Array, 1500, 8), "cuda:0", options, JSON.stringify(options));
});

// ------------------------------------------------------------- the handle

badInput("get() twice gives the same object; get() and await after dispose() are MTC_ERR_INVALID_STATE", async () => {
  const input = { a: patterned(Float32Array, 9, 1), b: [patterned(BigInt64Array, 3, 2)] };
  const h = startCopy(input, "cuda:0");
  const first = h.get();
  assertSame(h.get(), first);
  assertSame(await h, first);
  h.dispose();
  expectError(() => h.get(), "MTC_ERR_INVALID_STATE", undefined, "this AsyncCopyHandle was disposed");
  await assertRejects(() => h, MtcError, "disposed");
  tally.cases++;
  checkBytes(first.a.toHost(), input.a, tally, "outputs outlive the handle");
  checkBytes(first.b[0]!.toHost(), input.b[0]!, tally, "outputs outlive the handle");
  disposeAll(first);
  // Disposed before get(): the outputs are freed with the plan.
  const early = startCopy(makeExampleBatch(4), "cuda:1");
  early.dispose();
  expectError(() => early.get(), "MTC_ERR_INVALID_STATE", undefined, "disposed");
  tally.copies += 4;
});

badInput("dispose() while in flight waits, releases the outputs, and the pools come back", async () => {
  const onGpu = startCopy(makeExampleBatch(6), "cuda:0").get();
  await withCopyDelay(30_000, () => {
    for (const [batch, device] of [[makeExampleBatch(5), "cuda:0"], [makeExampleBatch(5), "cuda:1"], [onGpu, "cpu"], [onGpu, "cuda:1"]] as const) {
      const mark = poolMark();
      const h = startCopy(batch, device) as AsyncCopyHandle<unknown>;
      assertSame(h.ready(), false, `a 30 ms copy to ${device} is in flight`);
      assert(poolMark().plansLive === mark.plansLive + 1);
      const t0 = performance.now();
      h.dispose();
      assert(performance.now() - t0 >= 10, "dispose waited for the copy");
      assertPoolsBack(mark, `dispose in flight to ${device}`);
      assertSame(h.ready(), true);
      expectError(() => h.get(), "MTC_ERR_INVALID_STATE", undefined, "disposed");
      tally.copies++;
    }
  });
  disposeAll(onGpu);
  tally.copies++;
}, true, NEEDS_HOOKS);

badInput("dispose() while an await is pending: the await rejects and the pools come back", async () => {
  await withCopyDelay(30_000, async () => {
    const mark = poolMark();
    const h = startCopy(makeExampleBatch(7), "cuda:0");
    const awaited = h.then(() => "resolved", (e: unknown) => e);
    h.dispose(); // Deno: the C release waits for the pending nonblocking wait
    const e = await awaited;
    assert(e instanceof MtcError && e.code === "MTC_ERR_INVALID_STATE", String(e));
    assertPoolsBack(mark, "dispose with an await pending");
    tally.cases++;
    tally.copies++;
  });
}, runner === "bun", NEEDS_HOOKS);

badInput("a failed startCopy keeps no reference to its inputs", async () => {
  const refs = (() => {
    const good = Array.from({ length: 20 }, (_, i) => patterned(Float32Array, 4, i));
    const bad = new Uint8Array(2);
    detach(bad.buffer);
    assertThrows(() => startCopy([...good, bad], "cuda:0"), MtcError, "[20]: its ArrayBuffer was detached");
    return good.map((g) => new WeakRef(g));
  })();
  const rounds = await collectUntil(() => refs.every((r) => r.deref() === undefined), 30);
  const left = refs.flatMap((r, i) => (r.deref() === undefined ? [] : [i]));
  assert(rounds >= 0, `inputs still reachable after the failed copy: [${left.join(", ")}] of 20`);
  tally.cases++;
}, true, NEEDS_GC);

test("bad input: totals: every case ran, every copy checked", () => tally.check(runner, { cases: 185, copies: 158, bytes: 15_091_092 }), {
  skip: skip ?? (NEEDS_HOOKS !== undefined || NEEDS_GC !== undefined ? "some cases were skipped" : undefined),
});
