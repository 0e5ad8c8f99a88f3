// How a copy reads its leaves, through the emulated driver. A Tensor's
// fields (getters of the caller's, here counting their reads) are read once
// by every copy: startCopy to a device and to "cpu", dense and strided,
// copyHostLeaves, copyInto's source and destination, also when the leaf is
// refused (before, a strided Tensor's strides were read twice on the way
// to "cpu", and copyInto read dtype and offset up to four times). Messages
// about a leaf come from what was read and the engine's measure of its
// data, never from the array's own properties. Host addresses are read
// eight leaves a call at submit, in Bun as in Deno, and a run of eight
// DeviceTensors costs no call.
import { copyInto, type CopyOptions, type DeviceTensor, disposeAll, MtcError, startCopy, Tensor } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const FIELDS = ["data", "dtype", "shape", "strides", "offset"] as const;
type Reads = Record<(typeof FIELDS)[number], number>;

/** `tensor` with each field a getter that counts its reads and gives what the field held (or `replace`'s value). */
function counted(tensor: Tensor, replace: Partial<Record<(typeof FIELDS)[number], unknown>> = {}): Reads {
  const reads: Reads = { data: 0, dtype: 0, shape: 0, strides: 0, offset: 0 };
  for (const field of FIELDS) {
    const value = field in replace ? replace[field] : tensor[field];
    Object.defineProperty(tensor, field, { get: () => (reads[field]++, value), configurable: true });
  }
  return reads;
}

function expectReads(reads: Reads, expected: Partial<Reads>, what: string): void {
  const want: Reads = { data: 1, dtype: 1, shape: 1, strides: 1, offset: 1, ...expected };
  assertEquals(reads, want, `${what}: reads of each field`);
}

const dense = () => new Tensor(Float32Array.from({ length: 6 }, (_, i) => i), [2, 3]);
const strided = () => new Tensor(Float32Array.from({ length: 6 }, (_, i) => i), [3, 2], "float32", { strides: [1, 3] });

test("leaf reads: startCopy reads each field of a Tensor once: to a device, to cpu, strided, copyHostLeaves", async () => {
  const cases: [string, () => Tensor, string, CopyOptions | undefined, Partial<Reads>][] = [
    ["dense to cuda:0", dense, "cuda:0", undefined, {}],
    ["strided to cuda:0", strided, "cuda:0", undefined, { offset: 1 }],
    ["strided to cpu", strided, "cpu", undefined, { offset: 1 }],
    ["dense to cpu, copyHostLeaves", dense, "cpu", { copyHostLeaves: true }, {}],
    ["dense to cpu, reused", dense, "cpu", undefined, { data: 0, dtype: 0, shape: 0, offset: 0 }],
  ];
  for (const [what, make, device, options, expected] of cases) {
    const tensor = make();
    const reads = counted(tensor);
    const out = await startCopy({ t: tensor }, device as "cpu", options);
    expectReads(reads, expected, what);
    disposeAll(out);
  }
}, { skip: skipWithoutDriver });

test("leaf reads: a refused Tensor's fields are read once too, and the message says what was read", () => {
  // A reassigned shape that does not fit the data.
  const mismatch = dense();
  const reads = counted(mismatch, { shape: [5] });
  assertThrows(() => startCopy({ t: mismatch }, "cuda:0"), MtcError, ".t: the Tensor's Float32Array has 6 elements but its shape [5] needs 5");
  expectReads(reads, {}, "a shape that does not fit");
  // A shape that is no array of integers: shown as it was read.
  const forged = dense();
  const forgedReads = counted(forged, { shape: [2, "3"] });
  assertThrows(() => startCopy({ t: forged }, "cuda:0"), MtcError, `the Tensor's shape [2, "3"] is not an array of integers >= 0`);
  expectReads(forgedReads, {}, "a forged shape");
  // A strided Tensor whose data is no typed array.
  const noArray = strided();
  const noArrayReads = counted(noArray, { data: new DataView(new ArrayBuffer(24)) });
  assertThrows(() => startCopy({ t: noArray }, "cpu"), MtcError, "the Tensor's data is not a typed array");
  expectReads(noArrayReads, { offset: 1 }, "strided, no typed array");
  // copyHostLeaves refuses as a copy to a device does.
  const cloned = dense();
  const clonedReads = counted(cloned, { dtype: "float64" });
  assertThrows(() => startCopy({ t: cloned }, "cpu", { copyHostLeaves: true }), MtcError, "the Tensor's Float32Array cannot store its dtype float64");
  expectReads(clonedReads, {}, "copyHostLeaves, a dtype that does not fit");
});

test("leaf reads: messages measure the data by the engine, not by the array's own length, byteLength or constructor", () => {
  const data = new Float32Array(4);
  let ownReads = 0;
  for (const [name, value] of [["length", 99], ["byteLength", 999], ["constructor", { name: "Fake" }]] as const) {
    Object.defineProperty(data, name, { get: () => (ownReads++, value), configurable: true });
  }
  const tensor = new Tensor(new Float32Array(4), [4]);
  Object.defineProperty(tensor, "data", { value: data });
  Object.defineProperty(tensor, "shape", { value: [5] });
  assertThrows(() => startCopy([tensor], "cuda:0"), MtcError, "[0]: the Tensor's Float32Array has 4 elements but its shape [5] needs 5");
  Object.defineProperty(tensor, "dtype", { value: "float64" });
  Object.defineProperty(tensor, "shape", { value: [4] });
  assertThrows(() => startCopy([tensor], "cuda:0"), MtcError, "[0]: the Tensor's Float32Array cannot store its dtype float64 (a Float64Array can");
  const odd = new Tensor(new Float32Array(4), [2], "complex64");
  Object.defineProperty(odd, "data", { value: Object.defineProperty(new Float32Array(3), "length", { value: 4 }) });
  assertThrows(() => startCopy([odd], "cuda:0"), MtcError, "the Tensor's Float32Array has an odd length, 3");
  assertSame(ownReads, 0, "no own property of the array was read");
}, { skip: skipWithoutDriver });

test("leaf reads: copyInto reads each field of a source and a destination Tensor once", async () => {
  const onGpu = await startCopy({ t: dense() }, "cuda:0") as unknown as { t: DeviceTensor };
  const source = strided();
  const sourceReads = counted(source);
  await copyInto({ t: source }, { t: new Tensor(new Float32Array(6), [3, 2]) });
  expectReads(sourceReads, { offset: 1 }, "a strided source");
  const destination = new Tensor(new Float32Array(6), [2, 3]);
  const destinationReads = counted(destination);
  await copyInto(onGpu, { t: destination });
  expectReads(destinationReads, {}, "a destination");
  assertEquals(Array.from(destination.data as Float32Array), [0, 1, 2, 3, 4, 5]);
  const refused = dense();
  const refusedReads = counted(refused, { dtype: "int64" });
  assertThrows(() => copyInto({ t: refused }, onGpu), MtcError, "the Tensor's Float32Array cannot store its dtype int64");
  expectReads(refusedReads, {}, "a refused source");
  disposeAll(onGpu);
}, { skip: skipWithoutDriver });

test("leaf reads: host addresses are read eight leaves a call, none for eight DeviceTensors in a row", async () => {
  const child = new URL("./fixtures/address_calls_child.ts", import.meta.url).pathname;
  const r = await runScript(child, [], { MTC_TRACE_FFI: "1" });
  assertSame(r.code, 0, `child: ${r.stderr.slice(-2000)}`);
  assert(r.stdout.includes("exact"), `every result exact: ${r.stdout}`);
  const calls = new Map<string, number>();
  let phase = "";
  for (const line of r.stderr.split("\n")) {
    if (line.startsWith("phase ")) phase = line.slice(6);
    else if (line.includes("mtc_leaves_set_addresses(") && phase !== "" && phase !== "end") calls.set(phase, (calls.get(phase) ?? 0) + 1);
  }
  assertEquals(Object.fromEntries(calls), { mixed: 1, host: 3 }, "calls of mtc_leaves_set_addresses by copy");
}, { skip: skipWithoutDriver, timeout: 60_000 });

test("an array detached by a getter read after it is refused with its path, saying so", () => {
  const victim = new Int32Array([1, 2, 3, 4]);
  const batch: Record<string, unknown> = { a: victim };
  Object.defineProperty(batch, "b", { enumerable: true, get: () => (structuredClone(victim.buffer, { transfer: [victim.buffer] }), new Int32Array(4)) });
  const e = assertThrows(() => startCopy(batch, "cuda:0"), MtcError, "detached or shrunk while the batch was read");
  assertSame(e.path, ".a");
}, { skip: skipWithoutDriver });
