/**
 * What a kernel launch takes from its caller, read once, and its arguments
 * written into the bytes `mtc_kernel_launch` hands the driver.
 *
 * The caller's code can run inside a launch: a getter on an argument or an
 * option, a Proxy trap on `args` or `options`. Everything here is read in
 * one pass, into values of our own, before the launch checks that what it
 * uses is alive; nothing the caller's code does afterwards can change what
 * C is given (kernel.ts, `Kernel.launch`).
 *
 * @module
 */

import type { BlockHolder } from "./block.ts";
import { deviceName } from "./device.ts";
import { checkOptionNames, invalidArgument, MtcError, Status } from "../base/errors.ts";
import { isStream, type Stream } from "./stream.ts";

/**
 * A kernel parameter's type, as its declaration says: `ptr` a device
 * pointer (8 bytes), `i32`/`u32` 32-bit integers, `i64`/`u64` 64-bit
 * integers, `f32` float, `f64` double.
 */
export type KernelParam = "ptr" | "i32" | "u32" | "i64" | "u64" | "f32" | "f64";

/** Every parameter type, in the order errors list them. */
export const PARAM_TYPES: readonly KernelParam[] = ["ptr", "i32", "u32", "i64", "u64", "f32", "f64"];

/** The most parameters a launch takes (MAX_PARAMS of lib/src/cuda/launch.c). */
export const MAX_PARAMS = 4096;

/**
 * @internal What a launch may use of a DeviceTensor argument, read from the
 * tensor's own private state by tensor/device_tensor.ts: never from an
 * object that only looks like one, whose fields could name any block.
 */
export interface TensorArgument {
  readonly address: number;
  readonly deviceIndex: number;
  /** The holder of its block: null when disposed, or empty (no block). */
  readonly holder: BlockHolder | null;
  readonly disposed: boolean;
}

/** Where and how wide a launch runs. */
export interface LaunchOptions {
  /** The stream to queue the launch on: of the module's device. */
  stream: Stream;
  /** Blocks in the grid: x, or [x], [x, y], [x, y, z] (missing extents are 1). */
  grid: number | readonly number[];
  /** Threads in a block, likewise. */
  block: number | readonly number[];
  /** Dynamic shared memory bytes (default 0). */
  sharedBytes?: number;
}

const LAUNCH_OPTION_NAMES: readonly string[] = ["stream", "grid", "block", "sharedBytes"];

/** A launch's inputs as read, once: from here on the caller's objects are not looked at again. */
export interface LaunchInput {
  stream: Stream;
  /** grid x, y, z, block x, y, z, shared bytes. */
  dims: Uint32Array;
  /** The arguments, copied out of `args`. */
  args: unknown[];
}

/**
 * Reads every option once (stream, grid, block, sharedBytes, in that order)
 * and copies `args` into an array of our own, checking their form; `name`
 * and `params` are the kernel's declaration.
 */
export function readLaunch(call: string, name: string, params: readonly KernelParam[], options: unknown, args: unknown): LaunchInput {
  checkOptionNames(options, LAUNCH_OPTION_NAMES, `${call}: `); // a misspelt sharedBytes must not launch with 0
  const given = options as Partial<LaunchOptions> | null | undefined;
  const stream = given?.stream;
  const grid = given?.grid;
  const block = given?.block;
  const shared = given?.sharedBytes;
  const count = params.length;
  const length: unknown = Array.isArray(args) ? args.length : undefined;
  if (length !== count) {
    const got = Array.isArray(args) ? show(length) : "no array";
    throw invalidArgument(`${call}: ${name}(${params.join(", ")}) takes ${count} arguments, got ${got}`);
  }
  const values: unknown[] = [];
  for (let i = 0; i < count; i++) values.push((args as unknown[])[i]);

  if (!isStream(stream)) throw invalidArgument(`${call}: options.stream must be a Stream`);
  const dims = new Uint32Array(7);
  extents(call, "grid", grid, dims, 0);
  extents(call, "block", block, dims, 3);
  const bytes = shared ?? 0;
  if (!Number.isInteger(bytes) || (bytes as number) < 0 || (bytes as number) > 0xffffffff) {
    throw invalidArgument(`${call}: sharedBytes ${show(bytes)} is not an integer 0 … 4294967295`);
  }
  dims[6] = bytes as number;
  return { stream, dims, args: values };
}

/** Writes a grid or block extent (x, [x], [x, y] or [x, y, z]) into dims at `at`, reading each once. */
function extents(call: string, what: string, value: unknown, dims: Uint32Array, at: number): void {
  const list: unknown[] = [];
  if (typeof value === "number") list.push(value);
  else if (Array.isArray(value)) {
    const length: unknown = value.length;
    if (length === 1 || length === 2 || length === 3) for (let i = 0; i < length; i++) list.push(value[i]);
  }
  if (list.length === 0) throw invalidArgument(`${call}: ${what} must be a number or an array of 1 to 3 numbers`);
  for (let i = 0; i < 3; i++) {
    const extent = i < list.length ? list[i] : 1;
    if (!Number.isInteger(extent) || (extent as number) < 1 || (extent as number) > 0xffffffff) {
      throw invalidArgument(`${call}: ${what} ${"xyz"[i]} is ${show(extent)}; extents are integers >= 1`);
    }
    dims[at + i] = extent as number;
  }
}

const RANGES = {
  ptr: [0n, 2n ** 64n - 1n],
  i32: [-(2n ** 31n), 2n ** 31n - 1n],
  u32: [0n, 2n ** 32n - 1n],
  i64: [-(2n ** 63n), 2n ** 63n - 1n],
  u64: [0n, 2n ** 64n - 1n],
} as const;

/** The bytes of a launch's arguments, one 8-byte slot each, and each slot's offset. */
export interface Marshalled {
  params: Uint8Array;
  offsets: Uint32Array;
}

/**
 * Writes each argument into its slot. A DeviceTensor is read through
 * `tensor` (its private state) and its block's holder gets a share, pushed
 * on `held`: the caller drops them once C has taken its own references.
 */
export function marshalArgs(
  call: string,
  params: readonly KernelParam[],
  args: readonly unknown[],
  device: number,
  tensor: (value: object) => TensorArgument | undefined,
  held: BlockHolder[],
): Marshalled {
  const count = params.length;
  const bytes = new Uint8Array(8 * Math.max(count, 1));
  const out = new DataView(bytes.buffer);
  const offsets = new Uint32Array(Math.max(count, 1));
  for (let i = 0; i < count; i++) {
    const at = (offsets[i] = 8 * i);
    const type = params[i]!;
    const value = args[i];
    const where = `${call}: argument ${i} (${type})`;
    if (type === "f32" || type === "f64") {
      if (typeof value !== "number") throw invalidArgument(`${where}: ${show(value)} is not a number`);
      if (type === "f32") out.setFloat32(at, value, true);
      else out.setFloat64(at, value, true);
    } else if (type === "ptr" && value === null) {
      out.setBigUint64(at, 0n, true);
    } else if (type === "ptr" && typeof value === "object" && value !== null) {
      const t = tensor(value);
      if (t === undefined) {
        throw invalidArgument(
          `${where}: ${show(value)} is no DeviceTensor of this library, device address or null ` +
            `(objects that only look like one, or made with Object.create, name no memory the library holds)`,
        );
      }
      if (t.disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${where}: the tensor was disposed`);
      if (t.deviceIndex !== device) {
        throw invalidArgument(`${where}: a tensor on ${deviceName(t.deviceIndex)}, but the kernel runs on ${deviceName(device)}`);
      }
      if (t.holder !== null) {
        t.holder.acquire();
        held.push(t.holder);
      }
      out.setBigUint64(at, BigInt(t.address), true);
    } else {
      const n = integerArg(where, type, value);
      if (type === "i32") out.setInt32(at, Number(n), true);
      else if (type === "u32") out.setUint32(at, Number(n), true);
      else if (type === "i64") out.setBigInt64(at, n, true);
      else out.setBigUint64(at, n, true);
    }
  }
  return { params: bytes, offsets };
}

/** The integer `value` stands for in `type`'s range, or an MtcError saying why it stands for none. */
function integerArg(where: string, type: keyof typeof RANGES, value: unknown): bigint {
  const [low, high] = RANGES[type];
  let n: bigint | undefined;
  if (typeof value === "bigint") n = value;
  else if (typeof value === "number" && Number.isInteger(value)) {
    n = BigInt(value);
    // Past 2^53 a number stands for several integers at once (2 ** 53 + 1
    // reads as 2 ** 53): which one was meant is already lost.
    if (!Number.isSafeInteger(value) && n >= low && n <= high) {
      throw invalidArgument(`${where}: ${value} is not a safe integer (beyond ±(2^53 - 1) a number cannot hold every integer exactly); pass a bigint`);
    }
  }
  if (n === undefined || n < low || n > high) {
    if (type === "ptr") throw invalidArgument(`${where}: ${show(value)} is no DeviceTensor, device address or null`);
    throw invalidArgument(`${where}: ${show(value)} is not an integer ${low} … ${high}`);
  }
  return n;
}

/** A value for an error message; a throwing getter on an object's constructor does not replace the error. */
export function show(value: unknown): string {
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "symbol") return value.toString();
  if ((typeof value === "object" && value !== null) || typeof value === "function") {
    try {
      const name: unknown = (value as { constructor?: { name?: unknown } }).constructor?.name;
      return typeof name === "string" && name !== "" ? name : "an object";
    } catch {
      return "an object";
    }
  }
  return String(value);
}
