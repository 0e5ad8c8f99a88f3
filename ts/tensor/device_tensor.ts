/**
 * Tensors in CUDA device memory, owned through refcounted blocks.
 *
 * @module
 */

import { BlockHolder } from "../gpu/block.ts";
import { type Device, deviceName } from "../gpu/device.ts";
import { allocateDeviceBlock } from "../gpu/device_memory.ts";
import { setTensorBlockReader } from "../gpu/kernel.ts";
import type { DType } from "./dtype.ts";
import type { DTypeOf, HostLeaf, HostLeafFor } from "./host_leaf.ts";

export type { DTypeOf, HostLeaf, HostLeafFor } from "./host_leaf.ts";
import { invalidArgument, MtcError, showValue, Status } from "../base/errors.ts";
import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { library } from "../ffi/library.ts";
import { frozenShape, shapeEntries, showShape, tooLarge } from "./shape.ts";
import { Tensor } from "./tensor.ts";
import type { ResultGroup } from "./result_group.ts";
import { DTYPE_SIZE, isDType } from "./dtype.ts";

// What the library reads of a DeviceTensor: its private state, never the
// public getters, which a subclass or a prototype swap could replace.

/** @internal The block holder (null when disposed or empty). Not a member, so it stays out of sight. */
export let holderOf: (tensor: DeviceTensor) => BlockHolder | null;
/** @internal The device address of the first element. */
export let tensorAddress: (tensor: DeviceTensor) => number;
/** @internal The bytes it spans. */
export let tensorBytes: (tensor: DeviceTensor) => number;
/** @internal The CUDA ordinal. */
export let tensorDevice: (tensor: DeviceTensor) => number;
/** @internal The dtype. */
export let tensorDType: (tensor: DeviceTensor) => DType;
/** @internal The shape (frozen). */
export let tensorShape: (tensor: DeviceTensor) => readonly number[];
/** @internal The offset of its address in its block. */
export let tensorOffset: (tensor: DeviceTensor) => number;
/** @internal True after dispose(). */
export let tensorDisposed: (tensor: DeviceTensor) => boolean;
/** @internal Its mtc_block (0 for none). */
export let tensorBlock: (tensor: DeviceTensor) => number;
/** @internal True when it shares its block with other leaves (packed). */
export let tensorPacked: (tensor: DeviceTensor) => boolean;
/** @internal True when a copy to the host gives it back as a Tensor whatever its shape (it was copied from a Tensor). */
export let tensorKeepsTensor: (tensor: DeviceTensor) => boolean;

/** Only this module holds it: no caller makes a DeviceTensor around an address of its choosing, for copies and launches to use. */
const MADE_HERE = Symbol("made by libmtc");
const MADE_BY = "a DeviceTensor is made by the library (startCopy, DeviceTensor.empty or zeros, fromDLPack, takeResult), never around an address";

/**
 * @internal Makes a DeviceTensor, the library's way past the private
 * constructor (copies' results, allocations, DLPack imports, moved
 * results); positional, as results come by the hundred. `shape` frozen
 * (frozenShape); the holder share is the caller's, now the tensor's;
 * `keepsTensor`: it comes back to the host as a Tensor (copied from one).
 */
export let makeDeviceTensor: (...fields: [
  address: number, shape: readonly number[], dtype: DType, device: number, byteLength: number,
  block: number, offset: number, packed: boolean, holder: BlockHolder | null, keepsTensor?: boolean,
  group?: ResultGroup | null,
]) => DeviceTensor;

/**
 * @internal True when `value` was made by DeviceTensor's constructor, so
 * that it has the private state: false for an object that only has the
 * prototype (Object.create, a subclass whose constructor returned another
 * object, a Proxy). `instanceof` says only what the prototype chain says.
 */
export let isDeviceTensor: (value: unknown) => value is DeviceTensor;

/**
 * @internal The error for an object that passes `instanceof DeviceTensor`
 * without being one (see isDeviceTensor), at the leaf `path`; `prefix`
 * ends with its subject ("the destination is ").
 */
export function notADeviceTensor(path?: string, prefix = ""): MtcError {
  return invalidArgument(
    `${prefix}not a DeviceTensor made by this library ` +
      "(it has DeviceTensor's prototype but not its state: made with Object.create, or by a subclass that skipped the constructor)",
    path,
  );
}

/** Throws unless `value` is a DeviceTensor made by the constructor: methods called on another object. */
function checkThis(value: unknown, method: string): asserts value is DeviceTensor {
  if (!isDeviceTensor(value)) throw notADeviceTensor(undefined, `DeviceTensor.${method}: this is `);
}

/**
 * @internal Gives a result made before its copy completed (address 0, no
 * block) its place in device memory, once the copy is over; the holder
 * share becomes the tensor's. Never called on a tensor handed out.
 */
export let settleDeviceTensor: (
  tensor: DeviceTensor,
  address: number,
  block: number,
  offset: number,
  packed: boolean,
  holder: BlockHolder | null,
) => void;

/**
 * How a DeviceTensor is copied back to the host: set by copy/start_copy.ts, which
 * imports this module (importing it here would close a module cycle).
 */
let copyToHost: ((tensor: DeviceTensor) => HostLeaf) | null = null;

/** @internal Called once by copy/start_copy.ts. */
export function setCopyToHost(fn: (tensor: DeviceTensor) => HostLeaf): void {
  copyToHost = fn;
}

/**
 * A tensor in CUDA device memory, made by {@link startCopy}. It holds a
 * share of the device allocation ("block") it lives in; packed tensors share
 * one block, which is freed when the last of them is disposed (or, as a
 * backstop, garbage-collected).
 *
 * Only the library makes them (`startCopy`, `DeviceTensor.empty` / `zeros`,
 * `fromDLPack`, `takeResult`): `new DeviceTensor(...)` throws MtcError, so
 * no tensor names an address the library did not hand out.
 *
 * Its fields are read-only getters (assigning one throws). Copies, toHost
 * and toDLPack read the tensor's own state, so an own property or a
 * subclass's getter over a field changes only what your code sees there.
 *
 * `H` is what a copy to the host gives back ({@link toHost}, `startCopy(x,
 * "cpu")`): a copy of a {@link Tensor} is a `DeviceTensor<Tensor>` and comes
 * back as a Tensor; a copy of a bare `Float32Array` a
 * `DeviceTensor<Float32Array>` and comes back as one; others
 * (`DeviceTensor.empty`, `fromDLPack`) may be either. Its `dtype` is typed
 * from `H` ({@link DTypeOf}): a `DeviceTensor<Tensor<"float32">>` or a
 * `DeviceTensor<Float32Array>` says "float32".
 
 *
 * @example
 * ```ts
 * using onGpu = await startCopy(new Float32Array([1, 2, 3]), "cuda:0");
 * console.log(onGpu.address.toString(16), onGpu.shape); // ... [3]
 * const back = onGpu.toHost(); // Float32Array [1, 2, 3]
 * ```
 */
export class DeviceTensor<H extends HostLeaf = HostLeaf> {
  // Every public field is a getter over this state: the copies read the
  // state itself, so reassigning a field (readonly only by type) cannot make
  // them read or write past the tensor.
  #address: number;
  #shape: readonly number[];
  #dtype: DType;
  #device: number;
  #byteLength: number;
  #block: number;
  #offset: number;
  #packed: boolean;
  #holder: BlockHolder | null;
  #disposed = false;
  /** A copy to the host gives a Tensor, whatever the shape: this was copied from a Tensor. */
  #keepsTensor: boolean;
  /** A prepared copy's result: the group holds the block shares, and disposing it disposes this tensor too. */
  #group: ResultGroup | null;

  /** Made by the library only ({@link makeDeviceTensor}): `new DeviceTensor()` throws MtcError. */
  private constructor(
    made: symbol,
    address: number,
    shape: readonly number[],
    dtype: DType,
    device: number,
    byteLength: number,
    block: number,
    offset: number,
    packed: boolean,
    holder: BlockHolder | null,
    keepsTensor = false,
    group: ResultGroup | null = null,
  ) {
    if (made !== MADE_HERE) throw invalidArgument(`new DeviceTensor(): ${MADE_BY}`);
    this.#keepsTensor = keepsTensor;
    this.#group = group;
    this.#address = address;
    // Frozen by whoever made it (the source Tensor's, or a cached [n]).
    this.#shape = shape;
    this.#dtype = dtype;
    this.#device = device;
    this.#byteLength = byteLength;
    this.#block = block;
    this.#offset = offset;
    this.#packed = packed;
    // The holder is reachable only through its tensors: when the last one is
    // collected without dispose(), the holder's own finalizer frees the block.
    this.#holder = holder;
  }

  /**
   * The device pointer (CUdeviceptr) of the first element; 0 for an empty
   * tensor. Throws MtcError (MTC_ERR_INVALID_STATE) once the tensor is
   * disposed: its memory may already belong to another tensor, so a stale
   * pointer is never handed out (shape, dtype, device and `disposed` stay
   * readable).
   */
  get address(): number {
    if (this.#disposed || (this.#group !== null && this.#group.disposed)) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `DeviceTensor.address: this DeviceTensor (${deviceName(this.#device)}) was disposed: its address is no longer valid`);
    }
    return this.#address;
  }

  /** Extent of each dimension (row-major, dense). Frozen, and shared with the source's shape. */
  get shape(): readonly number[] {
    return this.#shape;
  }

  /** The element type. */
  get dtype(): DTypeOf<H> {
    return this.#dtype as DTypeOf<H>;
  }

  /** Where it lives: "cuda:N". */
  get device(): Device {
    return deviceName(this.#device);
  }

  /** The CUDA device ordinal N. */
  get deviceIndex(): number {
    return this.#device;
  }

  /** Bytes of data. */
  get byteLength(): number {
    return this.#byteLength;
  }

  /** An opaque id of the block that owns the memory (0 for none); equal for tensors that share one. */
  get block(): number {
    return this.#block;
  }

  /** Offset of `address` in its block. */
  get offset(): number {
    return this.#offset;
  }

  /** True when the copy packed this tensor into a chunk shared with others. */
  get packed(): boolean {
    return this.#packed;
  }

  /**
   * A new tensor of `shape` and `dtype` on `device` ("cuda" is the current
   * device), in a device block of its own, with undefined contents: for
   * kernels to write (see `Module` and `Kernel`). Freed like any DeviceTensor, by
   * dispose() or, as a backstop, garbage collection. Returns once the memory
   * may be used from any stream of the device.
   *
   * @example
   * ```ts
   * using out = DeviceTensor.empty([4, 3], "float32", "cuda:0"); // 48 bytes on cuda:0
   * ```
   */
  static empty<D extends DType>(shape: readonly number[], dtype: D, device: Device | number): DeviceTensor<HostLeafFor<D>> {
    return allocate("empty", shape, dtype, device, false) as DeviceTensor<HostLeafFor<D>>;
  }

  /** Like {@link DeviceTensor.empty}, with every byte zero. */
  static zeros<D extends DType>(shape: readonly number[], dtype: D, device: Device | number): DeviceTensor<HostLeafFor<D>> {
    return allocate("zeros", shape, dtype, device, true) as DeviceTensor<HostLeafFor<D>>;
  }

  /** True after dispose(). */
  get disposed(): boolean {
    checkThis(this, "disposed");
    return this.#disposed || (this.#group !== null && this.#group.disposed);
  }

  static {
    markClass(this, "DeviceTensor");
    makeDeviceTensor = (address, shape, dtype, device, byteLength, block, offset, packed, holder, keepsTensor, group) =>
      new DeviceTensor(MADE_HERE, address, shape, dtype, device, byteLength, block, offset, packed, holder, keepsTensor, group);
    isDeviceTensor = (value): value is DeviceTensor => typeof value === "object" && value !== null && #holder in value;
    // A disposed group's leaves keep their holder field (disposing a group touches no leaf): read as none.
    holderOf = (tensor) => tensor.#group !== null && tensor.#group.disposed ? null : tensor.#holder;
    tensorAddress = (tensor) => tensor.#address;
    tensorBytes = (tensor) => tensor.#byteLength;
    tensorDevice = (tensor) => tensor.#device;
    tensorDType = (tensor) => tensor.#dtype;
    tensorShape = (tensor) => tensor.#shape;
    tensorOffset = (tensor) => tensor.#offset;
    tensorDisposed = (tensor) => tensor.#disposed || (tensor.#group !== null && tensor.#group.disposed);
    tensorKeepsTensor = (tensor) => tensor.#keepsTensor;
    tensorBlock = (tensor) => tensor.#block;
    tensorPacked = (tensor) => tensor.#packed;
    // console.log: "DeviceTensor(float32 [2, 3] cuda:0)", ", disposed" once it is (no getter: the address would throw).
    defineInspect<DeviceTensor>(this.prototype, "DeviceTensor", (t) => {
      if (!(#holder in t)) return "DeviceTensor (not made by this library)";
      const disposed = t.#disposed || (t.#group !== null && t.#group.disposed);
      return `DeviceTensor(${t.#dtype} ${showShape(t.#shape)} ${deviceName(t.#device)}${disposed ? ", disposed" : ""})`;
    });
    // A brand check (no prototype walk, no Proxy trap): a look-alike is undefined.
    setTensorBlockReader((value) =>
      #holder in value
        ? { address: value.#address, deviceIndex: value.#device, holder: holderOf(value), disposed: tensorDisposed(value) }
        : undefined
    );
    settleDeviceTensor = (tensor, address, block, offset, packed, holder) => {
      tensor.#address = address;
      tensor.#block = block;
      tensor.#offset = offset;
      tensor.#packed = packed;
      tensor.#holder = holder;
    };
  }

  /**
   * Copies the tensor back to host memory, blocking until done, into a fresh
   * ArrayBuffer-backed array: a {@link Tensor} when the tensor was copied
   * from a Tensor (whatever its shape); otherwise a plain typed array for
   * 1-D tensors of a dtype that a typed array kind stands for (float32 →
   * Float32Array, int64 → BigInt64Array, float16 → Float16Array where the
   * runtime has it), and a Tensor for the rest (other shapes; bool as
   * Uint8Array, bfloat16 and float16 without Float16Array as Uint16Array,
   * complex64 and complex128 as interleaved Float32Array and Float64Array).
   * Use {@link toTensor} for a Tensor always.
   */
  toHost(): H {
    checkThis(this, "toHost");
    if (copyToHost === null) {
      throw new MtcError(Status.MTC_ERR_INTERNAL, "toHost: the copy module is not loaded (import the library through mod.ts)");
    }
    return copyToHost(this) as H;
  }

  /** Like {@link toHost}, but always a Tensor with this tensor's shape and dtype. */
  toTensor(): Tensor<DTypeOf<H>> {
    checkThis(this, "toTensor");
    return asTensor(this.toHost(), this.#shape, this.#dtype) as Tensor<DTypeOf<H>>;
  }

  /** Gives this tensor's share of its block back. Idempotent. */
  dispose(): void {
    checkThis(this, "dispose");
    if (this.#disposed) return;
    this.#disposed = true;
    const holder = this.#holder;
    this.#holder = null;
    // A prepared result's leaf: the group holds the share, and lets it go with its last leaf.
    if (this.#group !== null) this.#group.leafDisposed();
    else if (holder !== null) holder.drop();
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** DeviceTensor.empty and zeros: checks, then a block of the tensor's own. */
function allocate(what: string, shape: readonly number[], dtype: DType, device: Device | number, zero: boolean): DeviceTensor {
  const call = `DeviceTensor.${what}`;
  if (!isDType(dtype)) throw invalidArgument(`${call}: unknown dtype ${showValue(dtype)}`);
  if (!Array.isArray(shape)) throw invalidArgument(`${call}: the shape must be an array of integers >= 0, got ${showValue(shape)}`);
  const extents = shapeEntries(shape) as number[]; // each extent read once: what is checked is what is kept
  let count = 1;
  for (const extent of extents) {
    if (!Number.isSafeInteger(extent) || extent < 0) {
      throw invalidArgument(`${call}: invalid shape ${showShape(extents)}: extents must be integers >= 0`);
    }
    count *= extent;
  }
  const large = tooLarge(extents, dtype, count, DTYPE_SIZE[dtype]);
  if (large !== null) throw invalidArgument(`${call}: ${large}`);
  const bytes = count * DTYPE_SIZE[dtype];
  const { ordinal, block, address } = allocateDeviceBlock(call, device, bytes, zero);
  let holder: BlockHolder | null = null;
  if (block !== 0) {
    holder = new BlockHolder(block); // its own reference; the allocation's goes
    library().symbols.mtc_block_release(block);
    holder.acquire();
  }
  return makeDeviceTensor(address, frozenShape(extents), dtype, ordinal, bytes, block, 0, false, holder);
}

function asTensor(value: HostLeaf, shape: readonly number[], dtype: DType): Tensor {
  return value instanceof Tensor ? value : new Tensor(value, shape, dtype);
}
