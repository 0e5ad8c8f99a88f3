/**
 * The caller's own CUDA kernels: a {@link Module} loaded from PTX text or
 * cubin / fatbin bytes (the driver compiles PTX; no CUDA toolkit at run
 * time), a {@link Kernel} looked up by name with its declared parameter
 * types, and launches on a library {@link Stream}.
 *
 * @module
 */

import type { BlockHolder } from "./block.ts";
import { type Device, deviceName } from "./device.ts";
import { invalidArgument, MtcError, Status, statusName } from "../base/errors.ts";
import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import {
  type KernelParam,
  type LaunchOptions,
  marshalArgs,
  MAX_PARAMS,
  PARAM_TYPES,
  readLaunch,
  show,
  type TensorArgument,
} from "./kernel_args.ts";
import { cudaOrdinal, liveHandle, streamOrdinal } from "./stream.ts";

export type { KernelParam, LaunchOptions, TensorArgument } from "./kernel_args.ts";

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
 * A DeviceTensor's own state, or undefined for any other object: set by
 * tensor/device_tensor.ts, which this folder may not import.
 */
let tensorArgument: (value: object) => TensorArgument | undefined = () => undefined;

/** @internal Called once by tensor/device_tensor.ts. */
export function setTensorBlockReader(read: (value: object) => TensorArgument | undefined): void {
  tensorArgument = read;
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

/**
 * Only this module holds it; the constructors take it, so that no caller
 * makes a Module or Kernel around a pointer of its own choosing.
 */
const MADE_HERE = Symbol("made by libmtc");

/** @internal The mtc_module pointer of a live module, from its private state (throws after dispose). */
let modulePointer: (module: Module, call: string) => number;

/** @internal A module's CUDA ordinal, from its private state. */
let moduleOrdinal: (module: Module) => number;

/** @internal True once the module was unloaded, from its private state. */
let moduleDisposed: (module: Module) => boolean;

// Intrinsic getters, read once: a getter the caller defines on an image (a
// lying `byteLength`) or on a prototype is never consulted.
const typedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
const intrinsic = (on: object, key: PropertyKey) => Object.getOwnPropertyDescriptor(on, key)!.get!;
const viewKind = intrinsic(typedArrayPrototype, Symbol.toStringTag) as (this: unknown) => string | undefined;
const viewBuffer = intrinsic(typedArrayPrototype, "buffer") as (this: unknown) => ArrayBufferLike;
const viewBytes = intrinsic(typedArrayPrototype, "byteLength") as (this: unknown) => number;
const bufferBytes = intrinsic(ArrayBuffer.prototype, "byteLength") as (this: unknown) => number;
const bufferDetached = intrinsic(ArrayBuffer.prototype, "detached") as (this: unknown) => boolean;

function isArrayBuffer(value: unknown): value is ArrayBuffer {
  try {
    bufferBytes.call(value); // throws for anything else, a SharedArrayBuffer included
    return true;
  } catch {
    return false;
  }
}

function isDetached(buffer: unknown): boolean {
  return isArrayBuffer(buffer) && bufferDetached.call(buffer); // shared memory is never detached
}

/** A module image as bytes of our own: PTX text, or a copy of the caller's bytes. */
function imageBytes(call: string, image: unknown): Uint8Array {
  if (typeof image === "string") return encoder.encode(image);
  const detached = `${call}: the image's ArrayBuffer was detached (transferred); pass the bytes before transferring them`;
  if (viewKind.call(image) === "Uint8Array") {
    if (isDetached(viewBuffer.call(image))) throw invalidArgument(detached);
    if (viewBytes.call(image) === 0) return new Uint8Array(0); // out of bounds of a shrunk buffer too
    return new Uint8Array(image as Uint8Array);
  }
  if (isArrayBuffer(image)) {
    if (isDetached(image)) throw invalidArgument(detached);
    return new Uint8Array(new Uint8Array(image));
  }
  throw invalidArgument(`${call}: the image must be PTX text (a string) or a Uint8Array / ArrayBuffer of PTX, cubin or fatbin bytes`);
}

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
  #module: number;
  readonly #deviceIndex: number;

  private constructor(made: symbol, module: number, deviceIndex: number) {
    if (made !== MADE_HERE) throw invalidArgument("new Module(): a Module is made by Module.load");
    this.#module = module;
    this.#deviceIndex = deviceIndex;
    registry.register(this, module, this);
  }

  static {
    markClass(this, "Module");
    modulePointer = (module, call) => module.#live(call);
    moduleOrdinal = (module) => module.#deviceIndex;
    moduleDisposed = (module) => module.#module === 0;
    // console.log: "Module(cuda:0)", "Module(cuda:0, disposed)".
    defineInspect<Module>(this.prototype, "Module", (m) => {
      if (!(#module in m)) return "Module (not made by this library)";
      return `Module(${deviceName(m.#deviceIndex)}${m.#module === 0 ? ", disposed" : ""})`;
    });
  }

  /**
   * Loads a module on `device` ("cuda" is the current device): PTX as a
   * string, or the bytes of PTX, a cubin or a fatbin. Throws MtcError with
   * the driver's error (CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_PTX,
   * CUDA_ERROR_NO_BINARY_FOR_GPU, ...) when the driver rejects the image.
   */
  static load(image: string | Uint8Array | ArrayBuffer, device: Device | number = "cuda"): Module {
    const call = "Module.load";
    const bytes = imageBytes(call, image);
    const length = viewBytes.call(bytes);
    if (length === 0) throw invalidArgument(`${call}: the image is empty`);
    const ordinal = cudaOrdinal(device, call);
    const status = requireSymbol("mtc_module_load", "kernels")(ordinal, bytes, length, outWords);
    if (status !== Status.MTC_OK) throw fail(status, call);
    return new Module(MADE_HERE, u64Out(), ordinal);
  }

  /** `call`: the call the error names ("Module.function"). */
  #live(call: string): number {
    if (this.#module === 0) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${call}: this Module (${deviceName(this.#deviceIndex)}) was disposed`);
    return this.#module;
  }

  /** The device: "cuda:N". */
  get device(): Device {
    return deviceName(this.#deviceIndex);
  }

  /** Its CUDA ordinal N. */
  get deviceIndex(): number {
    return this.#deviceIndex;
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
    if (typeof name !== "string" || name.length === 0) throw invalidArgument(`Module.function: the name must be a non-empty string`);
    const call = `Module.function(${JSON.stringify(name)})`;
    if (!Array.isArray(params)) throw invalidArgument(`${call}: params must be an array of ${PARAM_TYPES.join(", ")}`);
    // Read once, index by index: a hole reads as undefined, which no launch could fill.
    const count: unknown = params.length;
    if (typeof count !== "number" || count > MAX_PARAMS) {
      throw invalidArgument(`${call}: ${show(count)} parameters; a kernel takes at most ${MAX_PARAMS}`);
    }
    const types: KernelParam[] = [];
    for (let i = 0; i < count; i++) {
      const type: unknown = params[i];
      if (!PARAM_TYPES.includes(type as KernelParam)) {
        const what = type === undefined ? "has no type (a hole or undefined in the list)" : `has type ${show(type)}`;
        throw invalidArgument(`${call}: parameter ${i} ${what}; expected one of ${PARAM_TYPES.join(", ")}`);
      }
      types.push(type as KernelParam);
    }
    const status = requireSymbol("mtc_module_get_function", "kernels")(this.#live(call), encoder.encode(name + "\0"), outWords);
    if (status !== Status.MTC_OK) throw fail(status, call);
    return makeKernel(this, name, Object.freeze(types), u64Out());
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

let makeKernel: (module: Module, name: string, params: readonly KernelParam[], fn: number) => Kernel;

/** A kernel of a {@link Module}, with its declared parameter types. */
export class Kernel {
  // Private: a launch reads only these, never fields the caller could reassign.
  readonly #module: Module;
  readonly #name: string;
  readonly #params: readonly KernelParam[];
  readonly #function: number;

  private constructor(made: symbol, module: Module, name: string, params: readonly KernelParam[], fn: number) {
    if (made !== MADE_HERE) throw invalidArgument("new Kernel(): a Kernel is made by Module.function");
    this.#module = module;
    this.#name = name;
    this.#params = params;
    this.#function = fn;
  }

  static {
    markClass(this, "Kernel");
    makeKernel = (module, name, params, fn) => new Kernel(MADE_HERE, module, name, params, fn);
    // console.log: "Kernel(add_one_f32(ptr, u32) cuda:0)", ", module disposed" once its module is.
    defineInspect<Kernel>(this.prototype, "Kernel", (k) => {
      if (!(#function in k)) return "Kernel (not made by this library)";
      const gone = moduleDisposed(k.#module) ? ", module disposed" : "";
      return `Kernel(${k.#name}(${k.#params.join(", ")}) ${deviceName(moduleOrdinal(k.#module))}${gone})`;
    });
  }

  /** The module it belongs to (kept alive by the kernel). */
  get module(): Module {
    return this.#module;
  }

  /** Its entry name. */
  get name(): string {
    return this.#name;
  }

  /** Its parameters' types, as declared to {@link Module.function} (frozen). */
  get params(): readonly KernelParam[] {
    return this.#params;
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
    // The caller's code can run inside this call (getters and Proxy traps on
    // options and args), and nothing it does may free or change what the
    // launch uses. So: 1. read every input once; 2. take a share of each
    // tensor's block; 3. check that the module and the stream are alive and
    // call C with nothing in between that could run the caller's code. C
    // holds the blocks until the stream has passed the launch (cuda/launch.c);
    // our shares then go.
    const call = `${this.#name}.launch`;
    const module = this.#module;
    const device = moduleOrdinal(module);
    const input = readLaunch(call, this.#name, this.#params, options, args);
    if (streamOrdinal(input.stream) !== device) {
      throw invalidArgument(`${call}: the stream is on ${deviceName(streamOrdinal(input.stream))}, the module on ${deviceName(device)}`);
    }
    const held: BlockHolder[] = [];
    try {
      const { params, offsets } = marshalArgs(call, this.#params, input.args, device, tensorArgument, held);
      const blocks = new BigUint64Array(Math.max(held.length, 1));
      for (let i = 0; i < held.length; i++) blocks[i] = BigInt(held[i]!.block);
      const launch = requireSymbol("mtc_kernel_launch", "kernels");
      const paramBytes = params.length;
      // From here to the call only private state is read: no code of the caller's runs.
      const pointer = modulePointer(module, call);
      const stream = liveHandle(input.stream, call);
      const status = launch(pointer, this.#function, stream, input.dims, params, paramBytes, offsets, this.#params.length, blocks, held.length);
      if (status !== Status.MTC_OK) throw fail(status, call);
    } finally {
      for (const holder of held) holder.drop();
    }
  }
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
