/**
 * `multi-tensor-copier doctor`: what this machine offers the library, and
 * whether a copy to a GPU works here. It prints the runtime, the library
 * (file, version, ABI, kernels), the CUDA driver (or why there is none),
 * each device with its memory, the peer-access matrix, the pinned limits
 * and what is held, and a short bandwidth probe of cuda:0 beside the floor
 * (one DMA from or into pinned memory). It answers 0 when a round trip
 * through cuda:0 gave the bytes back, else 1 with the reason on its last
 * line. It runs from the installed package (dist/cli.js) and from a clone
 * (ts/cli.ts).
 *
 * @module
 */

// The public calls through the package's entry, as an app has them (in the
// package, dist/cli.js holds them whole, as dist/mod.js does).
import {
  copyInto,
  cudaDeviceCount,
  cudaUnavailableReason,
  DeviceTensor,
  hasKernels,
  pinnedArray,
  poolStats,
  releaseHostOutput,
} from "./npm.ts";
import { cudaDeviceInfo, cudaDriverInfo, cudaPeerAccess } from "./gpu/info.ts";
import { library } from "./ffi/library.ts";
import { EXPECTED_VERSION_NUMBER } from "./ffi/symbols.ts";
import { getEnv, platform, runtime } from "./base/runtime.ts";

/** The environment knobs the library reads, shown when set. */
const KNOBS = [
  "MTC_LIBRARY_PATH",
  "MTC_CUDA_DRIVER",
  "MTC_TRACE",
  "MTC_TRACE_FILE",
  "MTC_TRACE_FFI",
  "MTC_PINNED_LIMIT",
  "MTC_PINNED_HELD_LIMIT",
  "MTC_STAGING_THREADS",
  "MTC_SPIN_US",
];

const PROBE_BYTES = 64 << 20;
/** The probe's four measurements share about one second. */
const PROBE_MS_EACH = 250;

function bytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(1)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${n} B`;
}

function runtimeText(): string {
  const g = globalThis as unknown as { Bun?: { version: string }; Deno?: { version: { deno: string; v8: string } } };
  const arch = (globalThis as unknown as { process?: { arch?: string } }).process?.arch ?? "?";
  if (runtime === "bun") return `Bun ${g.Bun!.version} (${platform()}-${arch})`;
  if (runtime === "deno") return `Deno ${g.Deno!.version.deno}, V8 ${g.Deno!.version.v8} (${platform()}-${arch})`;
  return "neither Bun nor Deno (the library needs bun:ffi or Deno.dlopen)";
}

/** Runs `copy` for about `ms` milliseconds and returns GB/s (10^9 bytes a second). */
async function rate(copy: () => PromiseLike<unknown>, ms: number): Promise<number> {
  await copy(); // the first one pays allocations
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  do {
    await copy();
    n++;
    elapsed = performance.now() - start;
  } while (elapsed < ms);
  return (n * PROBE_BYTES) / (elapsed / 1e3) / 1e9;
}

/** A small round trip through cuda:0: undefined when the bytes came back, else why not. */
async function roundTrip(): Promise<string | undefined> {
  const sent = Float32Array.from({ length: 1024 }, (_, i) => i * 0.5 - 3);
  const onGpu = DeviceTensor.empty([sent.length], "float32", "cuda:0");
  try {
    await copyInto(sent, onGpu);
    const back = new Float32Array(sent.length);
    await copyInto(onGpu, back);
    const wrong = back.findIndex((v, i) => v !== sent[i]);
    return wrong < 0 ? undefined : `a round trip through cuda:0 changed element ${wrong}: ${sent[wrong]} came back as ${back[wrong]}`;
  } finally {
    onGpu.dispose();
  }
}

/** Host to device and back, from and into pinned memory (the floor) and pageable memory (staged by the library). */
async function probe(print: (line: string) => void): Promise<void> {
  const onGpu = DeviceTensor.empty([PROBE_BYTES], "uint8", "cuda:0");
  const pinned = pinnedArray("uint8", PROBE_BYTES, { device: "cuda:0" });
  const pageable = new Uint8Array(PROBE_BYTES);
  try {
    const h2dFloor = await rate(() => copyInto(pinned, onGpu), PROBE_MS_EACH);
    const h2d = await rate(() => copyInto(pageable, onGpu), PROBE_MS_EACH);
    const d2hFloor = await rate(() => copyInto(onGpu, pinned), PROBE_MS_EACH);
    const d2h = await rate(() => copyInto(onGpu, pageable), PROBE_MS_EACH);
    const row = (what: string, got: number, floor: number) =>
      `  ${what}: ${got.toFixed(1)} GB/s from pageable memory, floor ${floor.toFixed(1)} GB/s (one DMA, pinned): ${(got / floor * 100).toFixed(0)}% of it`;
    print(`bandwidth probe, cuda:0, ${bytes(PROBE_BYTES)} a copy, ~${PROBE_MS_EACH} ms each:`);
    print(row("host -> device", h2d, h2dFloor));
    print(row("device -> host", d2h, d2hFloor));
  } finally {
    onGpu.dispose();
    releaseHostOutput(pinned);
  }
}

/**
 * Writes the report line by line to `print` and returns the exit status:
 * 0 when a copy to a GPU works here, 1 (the reason last) when it would fail.
 */
export async function doctor(print: (line: string) => void, options: { probe?: boolean } = {}): Promise<number> {
  const fail = (why: string): number => {
    print(`FAIL: a copy to a GPU would not work here: ${why}`);
    return 1;
  };
  print(`runtime: ${runtimeText()}`);
  const set = KNOBS.filter((k) => getEnv(k) !== undefined).map((k) => `${k}=${getEnv(k)}`);
  print(`environment: ${set.length > 0 ? set.join(" ") : "no MTC_ variable set (or, under Deno, not readable without --allow-env)"}`);

  let lib;
  try {
    lib = library();
  } catch (e) {
    print(`library: could not be loaded`);
    return fail((e as Error).message);
  }
  const abi = `${Math.floor(lib.versionNumber / 10000)}.${Math.floor(lib.versionNumber / 100) % 100}`;
  const wanted = `${Math.floor(EXPECTED_VERSION_NUMBER / 10000)}.${Math.floor(EXPECTED_VERSION_NUMBER / 100) % 100}`;
  print(`library: ${lib.path}`);
  print(`  version ${lib.versionString}, ABI ${abi} (these bindings need ${wanted}.x), kernels ${hasKernels() ? "built in" : "absent (device-to-host gathers fall back to one DMA per leaf)"}`);

  const why = cudaUnavailableReason();
  if (why !== undefined) {
    print(`driver: none: ${why}`);
    return fail(why);
  }
  const driver = cudaDriverInfo();
  print(`driver: ${driver ? `${driver.file}, CUDA ${driver.version}` : "loaded (this libmtc cannot say which)"}`);

  const count = cudaDeviceCount();
  print(`devices: ${count}`);
  for (let d = 0; d < count; d++) {
    try {
      const info = cudaDeviceInfo(d);
      print(`  cuda:${d}  ${info.name}, ${bytes(info.totalMemoryBytes)}`);
    } catch (e) {
      print(`  cuda:${d}  (${(e as Error).message})`);
    }
  }
  if (count > 1) {
    print(`peer access (row reads column's memory directly: yes, no):`);
    print(`          ${Array.from({ length: count }, (_, p) => `cuda:${p}`.padEnd(8)).join("")}`);
    for (let d = 0; d < count; d++) {
      const cells = Array.from({ length: count }, (_, p) => (p === d ? "-" : cudaPeerAccess(d, p) ? "yes" : "no").padEnd(8));
      print(`  ${`cuda:${d}`.padEnd(8)}${cells.join("")}`);
    }
  }

  const s = poolStats();
  print(`pinned staging: limit ${bytes(s.pinnedLimitBytes)}, lent to copies ${bytes(s.pinnedStagingBytes)}, idle ${bytes(s.pinnedBytesCached)}`);
  print(`pinned held (pinned tensors, arenas): ${bytes(s.pinnedHeldBytes)} of a limit of ${bytes(s.pinnedHeldLimitBytes)}; pinned outputs of copies: ${bytes(s.pinnedOutputBytes)}`);

  let broken: string | undefined;
  try {
    broken = await roundTrip();
  } catch (e) {
    broken = (e as Error).message;
  }
  if (broken !== undefined) return fail(broken);
  print(`round trip: 4 KiB to cuda:0 and back, the same bytes`);
  if (options.probe !== false) await probe(print);
  print(`ok: copies to and from cuda:0 work`);
  return 0;
}
