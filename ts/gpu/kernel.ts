/**
 * The caller's own CUDA kernels: a {@link Module} loaded from PTX text or
 * cubin / fatbin bytes (the driver compiles PTX; no CUDA toolkit at run
 * time), a {@link Kernel} looked up by name with its declared parameter
 * types, and launches on a library {@link Stream}.
 *
 * @module
 */

import { type Device, deviceName } from "./device.ts";
import { invalidArgument, MtcError, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { cudaOrdinal, Stream } from "./stream.ts";

/**
 * A kernel parameter's type, as its declaration says: `ptr` a device
 * pointer (8 bytes), `i32`/`u32` 32-bit integers, `i64`/`u64` 64-bit
 * integers, `f32` float, `f64` double.
 */
export type KernelParam = "ptr" | "i32" | "u32" | "i64" | "u64" | "f32" | "f64";

const PARAM_TYPES: readonly KernelParam[] = ["ptr", "i32", "u32", "i64", "u64", "f32", "f64"];

/** What a `ptr` parameter takes besides raw addresses: a DeviceTensor (its `address`). */
export interface DevicePointer {
  /** The device address passed to the kernel. */
  readonly address: number;
  /** The CUDA ordinal of its memory. */
  readonly deviceIndex: number;
  /** True once its memory may have been given back. */
  readonly disposed: boolean;
}

/**
 * One argument: for `ptr`, a {@link DevicePointer} (a DeviceTensor), a raw
 * address (number or bigint) or null; for integers, a number or bigint in
 * the type's range; for `f32`/`f64`, a number.
 */
export type KernelArg = DevicePointer | number | bigint | null;

/**
 * The libmtc block a DeviceTensor holds (0 for none), or undefined for any
 * other object: set by tensor/device_tensor.ts, which this folder may not
 * import.
 */
let tensorBlock: (value: object) => number | undefined = () => undefined;

/** @internal Called once by tensor/device_tensor.ts. */
export function setTensorBlockReader(read: (value: object) => number | undefined): void {
  tensorBlock = read;
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

const TWO_32 = 4294967296;
const outWords = new Uint32Array(2);
const u64Out = () => outWords[0]! + outWords[1]! * TWO_32;
const encoder = new TextEncoder();

function fail(status: number, call: string): MtcError {
  return new MtcError(status, `${call}: ${library().symbols.mtc_last_error() || statusName(status)}`);
}

/** Backstop for modules dropped without dispose(). */
const registry = new FinalizationRegistry<number>((module) => library().symbols.mtc_module_unload?.(module));

/** @internal The mtc_module pointer of a live module (throws after dispose). */
let modulePointer: (module: Module) => number;

/**
 * A CUDA module loaded on one device. `dispose()` (or `using`) unloads it;
 * garbage collection is the backstop.
 *
 * @example
 * ```ts
 * using stream = Stream.create("cuda:0");
 * using module = Module.load(ptxText, "cuda:0");
 * const addOne = module.function("add_one_f32", ["ptr", "u32"]);
 * using x = DeviceTensor.zeros([1000], "float32", "cuda:0");
 * addOne.launch({ stream, grid: 4, block: 256 }, [x, 1000]);
 * ```
 */
export class Module {
  /** The device: "cuda:N". */
  readonly device: Device;
  /** Its CUDA ordinal N. */
  readonly deviceIndex: number;
  #module: number;

  private constructor(module: number, deviceIndex: number) {
    this.#module = module;
    this.deviceIndex = deviceIndex;
    this.device = deviceName(deviceIndex);
    registry.register(this, module, this);
  }

  static {
    modulePointer = (module) => module.#live();
  }

  /**
   * Loads a module on `device` ("cuda" is the current device): PTX as a
   * string, or the bytes of PTX, a cubin or a fatbin. Throws MtcError with
   * the driver's error (CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX,
   * CUDA_ERROR_NO_BINARY_FOR_GPU, ...) when the driver rejects the image.
   */
  static load(image: string | Uint8Array | ArrayBuffer, device: Device | number = "cuda"): Module {
    const call = "Module.load";
    let bytes: Uint8Array;
    if (typeof image === "string") bytes = encoder.encode(image);
    else if (image instanceof Uint8Array) bytes = image;
    else if (image instanceof ArrayBuffer) bytes = new Uint8Array(image);
    else throw invalidArgument(`${call}: the image must be PTX text (a string) or a Uint8Array / ArrayBuffer of PTX, cubin or fatbin bytes`);
    if (bytes.byteLength === 0) throw invalidArgument(`${call}: the image is empty`);
    const ordinal = cudaOrdinal(device, call);
    const status = requireSymbol("mtc_module_load", "kernels")(ordinal, bytes, bytes.byteLength, outWords);
    if (status !== Status.MTC_OK) throw fail(status, call);
    return new Module(u64Out(), ordinal);
  }

  #live(): number {
    if (this.#module === 0) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `this Module (${this.device}) was disposed`);
    return this.#module;
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#module === 0;
  }

  /**
   * The kernel `name` (its entry name: `extern "C"` names as written, C++
   * names mangled) with the parameter types it declares, which each launch
   * checks its arguments against. MtcError (CUDA_ERROR_NOT_FOUND) when the
   * module has no such kernel.
   */
  function(name: string, params: readonly KernelParam[]): Kernel {
    const call = `Module.function(${JSON.stringify(name)})`;
    if (typeof name !== "string" || name.length === 0) throw invalidArgument(`Module.function: the name must be a non-empty string`);
    if (!Array.isArray(params)) throw invalidArgument(`${call}: params must be an array of ${PARAM_TYPES.join(", ")}`);
    const types = params.slice() as KernelParam[];
    types.forEach((type, i) => {
      if (!PARAM_TYPES.includes(type)) {
        throw invalidArgument(`${call}: parameter ${i} has type ${JSON.stringify(type)}; expected one of ${PARAM_TYPES.join(", ")}`);
      }
    });
    const status = requireSymbol("mtc_module_get_function", "kernels")(this.#live(), encoder.encode(name + "\0"), outWords);
    if (status !== Status.MTC_OK) throw fail(status, call);
    return new Kernel(this, name, Object.freeze(types), u64Out());
  }

  /** Unloads the module (launches already queued still run). Idempotent. */
  dispose(): void {
    const module = this.#module;
    if (module === 0) return;
    this.#module = 0;
    registry.unregister(this);
    library().symbols.mtc_module_unload?.(module);
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** A kernel of a {@link Module}, with its declared parameter types. */
export class Kernel {
  /** The module it belongs to (kept alive by the kernel). */
  readonly module: Module;
  /** Its entry name. */
  readonly name: string;
  /** Its parameters' types, as declared to {@link Module.function}. */
  readonly params: readonly KernelParam[];
  #function: number;

  /** @internal Made by Module.function. */
  constructor(module: Module, name: string, params: readonly KernelParam[], fn: number) {
    this.module = module;
    this.name = name;
    this.params = params;
    this.#function = fn;
  }

  /**
   * Queues the kernel on `options.stream` with `args`, one per declared
   * parameter; returns without waiting. The blocks of DeviceTensor
   * arguments stay allocated until the stream has passed the launch, even
   * if the tensors are disposed first. MtcError for arguments that do not
   * fit the declaration, and with the driver's error name and text when
   * the launch fails.
   */
  launch(options: LaunchOptions, args: readonly KernelArg[]): void {
    const call = `${this.name}.launch`;
    const stream = options?.stream;
    if (!(stream instanceof Stream)) throw invalidArgument(`${call}: options.stream must be a Stream`);
    stream.checkLive();
    const module = modulePointer(this.module);
    if (stream.deviceIndex !== this.module.deviceIndex) {
      throw invalidArgument(`${call}: the stream is on ${stream.device}, the module on ${this.module.device}`);
    }
    const dims = new Uint32Array(7);
    extents(call, "grid", options.grid, dims, 0);
    extents(call, "block", options.block, dims, 3);
    const shared = options.sharedBytes ?? 0;
    if (!Number.isInteger(shared) || shared < 0 || shared > 0xffffffff) {
      throw invalidArgument(`${call}: sharedBytes ${String(shared)} is not an integer 0 … 4294967295`);
    }
    dims[6] = shared;
    if (!Array.isArray(args) || args.length !== this.params.length) {
      const got = Array.isArray(args) ? `${args.length}` : "no array";
      throw invalidArgument(`${call}: ${this.name}(${this.params.join(", ")}) takes ${this.params.length} arguments, got ${got}`);
    }
    const count = this.params.length;
    const params = new DataView(new ArrayBuffer(8 * Math.max(count, 1)));
    const offsets = new Uint32Array(Math.max(count, 1));
    const blocks: number[] = [];
    for (let i = 0; i < count; i++) {
      offsets[i] = 8 * i;
      const block = marshal(call, this.params[i]!, args[i], i, params, this.module.deviceIndex);
      if (block !== 0) blocks.push(block);
    }
    const blockWords = new BigUint64Array(Math.max(blocks.length, 1));
    blocks.forEach((block, i) => (blockWords[i] = BigInt(block)));
    const status = requireSymbol("mtc_kernel_launch", "kernels")(
      module,
      this.#function,
      stream.handle,
      dims,
      new Uint8Array(params.buffer),
      params.byteLength,
      offsets,
      count,
      blockWords,
      blocks.length,
    );
    if (status !== Status.MTC_OK) throw fail(status, call);
  }
}

/** Writes a grid or block extent (x, [x], [x, y] or [x, y, z]) into dims at `at`. */
function extents(call: string, what: string, value: number | readonly number[], dims: Uint32Array, at: number): void {
  const list = typeof value === "number" ? [value] : value;
  if (!Array.isArray(list) || list.length < 1 || list.length > 3) {
    throw invalidArgument(`${call}: ${what} must be a number or an array of 1 to 3 numbers`);
  }
  for (let i = 0; i < 3; i++) {
    const extent = i < list.length ? list[i] : 1;
    if (!Number.isInteger(extent) || extent < 1 || extent > 0xffffffff) {
      throw invalidArgument(`${call}: ${what} ${"xyz"[i]} is ${String(extent)}; extents are integers >= 1`);
    }
    dims[at + i] = extent;
  }
}

const RANGES = {
  i32: [-(2n ** 31n), 2n ** 31n - 1n],
  u32: [0n, 2n ** 32n - 1n],
  i64: [-(2n ** 63n), 2n ** 63n - 1n],
  u64: [0n, 2n ** 64n - 1n],
} as const;

function asInteger(value: unknown): bigint | undefined {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  return undefined;
}

/**
 * Writes argument i into its 8-byte slot; returns the libmtc block it
 * keeps alive (0 for none).
 */
function marshal(call: string, type: KernelParam, value: unknown, i: number, out: DataView, device: number): number {
  const at = 8 * i;
  const where = `${call}: argument ${i} (${type})`;
  if (type === "f32" || type === "f64") {
    if (typeof value !== "number") throw invalidArgument(`${where}: ${show(value)} is not a number`);
    if (type === "f32") out.setFloat32(at, value, true);
    else out.setFloat64(at, value, true);
    return 0;
  }
  if (type === "ptr") {
    if (value === null) {
      out.setBigUint64(at, 0n, true);
      return 0;
    }
    if (typeof value === "object") {
      // Only a DeviceTensor's own holder names a block to hold: a look-alike
      // object could carry any number, which C would take for a block.
      const block = tensorBlock(value);
      if (block === undefined) throw invalidArgument(`${where}: ${show(value)} is no DeviceTensor, device address or null`);
      const pointer = value as DevicePointer;
      if (pointer.disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${where}: the tensor was disposed`);
      if (pointer.deviceIndex !== device) {
        throw invalidArgument(`${where}: a tensor on ${deviceName(pointer.deviceIndex)}, but the kernel runs on ${deviceName(device)}`);
      }
      out.setBigUint64(at, BigInt(pointer.address), true);
      return block;
    }
    const address = asInteger(value);
    if (address === undefined || address < 0n || address > RANGES.u64[1]) {
      throw invalidArgument(`${where}: ${show(value)} is no DeviceTensor, device address or null`);
    }
    out.setBigUint64(at, address, true);
    return 0;
  }
  const n = asInteger(value);
  const [low, high] = RANGES[type];
  if (n === undefined || n < low || n > high) {
    throw invalidArgument(`${where}: ${show(value)} is not an integer ${low} … ${high}`);
  }
  if (type === "i32") out.setInt32(at, Number(n), true);
  else if (type === "u32") out.setUint32(at, Number(n), true);
  else if (type === "i64") out.setBigInt64(at, n, true);
  else out.setBigUint64(at, n, true);
  return 0;
}

function show(value: unknown): string {
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "object" && value !== null) return value.constructor?.name ?? "an object";
  return String(value);
}

/**
 * Gives back the memory of tensors disposed while launches that use them
 * were queued, for the launches their streams have passed (launches and
 * `Stream.synchronize()` do this too); with `wait`, waits for every such
 * launch first. Returns how many launches still hold memory.
 */
export function settleLaunches(wait = false): number {
  return requireSymbol("mtc_launches_settle", "kernels")(wait ? 1 : 0);
}
