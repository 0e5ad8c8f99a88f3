// Runs inside a scratch project that installed the packed npm package: imports
// it by name, as a user would, and copies a small nested batch. Under Bun, and
// under Deno through node_modules.
//
//   smoke.ts                      copy to "cpu", and to "cuda:0" and back where a driver is found
//   smoke.ts --expect-error TEXT  the first use must throw MtcError whose message includes TEXT
import { cudaDeviceCount, cudaUnavailableReason, DeviceTensor, disposeAll, hasKernels, libraryVersion, MtcError, startCopy, Tensor } from "multi-tensor-copier";

// Runtime globals through one cast: the consumer's type check runs with no
// runtime's types (no bun-types, no DOM), to show the declarations need none.
const g = globalThis as unknown as {
  Deno?: { args: string[]; exit(code: number): never };
  process?: { argv: string[]; exit(code: number): never };
  console: { log(line: string): void; error(line: string): void };
};
const console = g.console;
const args = g.Deno ? g.Deno.args : g.process!.argv.slice(2);
const exit = (code: number): never => (g.Deno ? g.Deno.exit(code) : g.process!.exit(code));
const runtimeName = g.Deno ? "deno" : "bun";

function fail(message: string): never {
  console.error(`smoke (${runtimeName}): FAIL: ${message}`);
  return exit(1);
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) fail(message);
}

function sameBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

if (args[0] === "--expect-error") {
  const expected = args[1] ?? fail("--expect-error needs a text");
  try {
    libraryVersion();
  } catch (e) {
    check(e instanceof MtcError, `expected an MtcError, got ${String(e)}`);
    check(e.message.includes(expected), `expected the message to include ${JSON.stringify(expected)}, got ${JSON.stringify(e.message)}`);
    console.log(`smoke (${runtimeName}): error as expected: ${e.message}`);
    exit(0);
  }
  fail(`expected an MtcError including ${JSON.stringify(expected)}, but libmtc loaded`);
}

const boxes = new Float32Array(12).map((_, i) => i * 0.5);
const ids = new BigInt64Array([7n, -3n, 1n << 40n]);
const batch = {
  cams: [{ boxes: new Tensor(boxes, [3, 4]), ids, name: "cam0" }],
  map: new Map([["depth", new Uint16Array([1, 2, 3])]]),
  step: 3,
};

// Host to host: every leaf reused as it is, containers rebuilt.
const onHost = startCopy(batch, "cpu").get();
check(onHost !== batch && onHost.cams[0]!.ids === ids, "cpu copy: leaves reused, containers rebuilt");
check(onHost.cams[0]!.name === "cam0" && onHost.step === 3, "cpu copy: other leaves passed through");

let devices = 0;
try {
  devices = cudaDeviceCount();
} catch (e) {
  fail(`cudaDeviceCount threw ${String(e)}`);
}
const why = cudaUnavailableReason();
check(devices > 0 ? why === undefined : typeof why === "string" && why.length > 0, `cudaUnavailableReason() with ${devices} devices: ${why}`);
if (devices > 0) {
  const handle = startCopy(batch, "cuda:0");
  const onGpu = await handle;
  const gpuBoxes = onGpu.cams[0]!.boxes;
  check(gpuBoxes instanceof DeviceTensor, "cuda:0 copy gives DeviceTensors");
  check(gpuBoxes.device === "cuda:0" && gpuBoxes.shape.join("x") === "3x4", `boxes on ${gpuBoxes.device} [${gpuBoxes.shape}]`);
  check(onGpu.cams[0]!.name === "cam0" && onGpu.map.get("depth") instanceof DeviceTensor, "cuda:0 copy keeps the shape of the batch");
  const back = startCopy(onGpu, "cpu").get();
  const backBoxes = back.cams[0]!.boxes;
  check(backBoxes instanceof Tensor && sameBytes(backBoxes.data, boxes), "boxes come back unchanged");
  check(sameBytes(back.cams[0]!.ids as BigInt64Array, ids), "ids come back unchanged");
  check(sameBytes(back.map.get("depth") as Uint16Array, batch.map.get("depth")!), "depth comes back unchanged");
  disposeAll(onGpu);
  handle.dispose();
  console.log(`smoke (${runtimeName}): libmtc ${libraryVersion()}, kernels ${hasKernels()}: cpu and cuda:0 round trip ok (${devices} device(s))`);
} else {
  console.log(`smoke (${runtimeName}): libmtc ${libraryVersion()}, kernels ${hasKernels()}: cpu copy ok (no CUDA device: ${why})`);
}
