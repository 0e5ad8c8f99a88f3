/**
 * Tensors in CUDA device memory, owned through refcounted blocks.
 *
 * @module
 */

import { BlockHolder } from "../gpu/block.ts";
import { type Device, deviceName } from "../gpu/device.ts";
import { allocateDeviceBlock } from "../gpu/device_memory.ts";
import { setTensorBlockReader } from "../gpu/kernel.ts";
import type { DType, TypedArray } from "./dtype.ts";
import { invalidArgument, MtcError, showValue, Status } from "../base/errors.ts";
import { library } from "../ffi/library.ts";
import { frozenShape, showShape, tooLarge } from "./shape.ts";
import { Tensor } from "./tensor.ts";
import { DTYPE_SIZE, isDType } from "./dtype.ts";

/**
 * @internal The block holder of a DeviceTensor, for copies that read it
 * (null when disposed or empty). Not a member, so it stays out of sight.
 */
export let holderOf: (tensor: DeviceTensor) => BlockHolder | null;

/** @internal The shape the constructor was given (frozen), to tell a reassigned `shape` field. */
export let constructedDeviceShape: (tensor: DeviceTensor) => readonly number[];

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
let copyToHost: ((tensor: DeviceTensor) => TypedArray | Tensor) | null = null;

/** @internal Called once by copy/start_copy.ts. */
export function setCopyToHost(fn: (tensor: DeviceTensor) => TypedArray | Tensor): void {
  copyToHost = fn;
}

/**
 * A tensor in CUDA device memory, made by {@link startCopy}. It holds a
 * share of the device allocation ("block") it lives in; packed tensors share
 * one block, which is freed when the last of them is disposed (or, as a
 * backstop, garbage-collected).
 *
 * @example
 * ```ts
 * using onGpu = await startCopy(new Float32Array([1, 2, 3]), "cuda:0");
 * console.log(onGpu.address.toString(16), onGpu.shape); // ... [3]
 * const back = onGpu.toHost(); // Float32Array [1, 2, 3]
 * ```
 */
export class DeviceTensor {
  /** The device pointer (CUdeviceptr) of the first element; 0 for an empty tensor. */
  readonly address: number;
  /** Extent of each dimension (row-major, dense). Frozen, and shared with the source's shape. */
  readonly shape: readonly number[];
  /** The element type. */
  readonly dtype: DType;
  /** Where it lives: "cuda:N". */
  readonly device: Device;
  /** The CUDA device ordinal N. */
  readonly deviceIndex: number;
  /** Bytes of data. */
  readonly byteLength: number;
  /** An opaque id of the block that owns the memory (0 for none); equal for tensors that share one. */
  readonly block: number;
  /** Offset of `address` in its block. */
  readonly offset: number;
  /** True when the copy packed this tensor into a chunk shared with others. */
  readonly packed: boolean;
  #holder: BlockHolder | null;
  #disposed = false;
  #shape: readonly number[];

  /**
   * @internal Made by startCopy (positional: results come by the hundred).
   * `shape` must be frozen (frozenShape). The holder share is the caller's,
   * now owned by this tensor.
   */
  constructor(
    address: number,
    shape: readonly number[],
    dtype: DType,
    device: number,
    byteLength: number,
    block: number,
    offset: number,
    packed: boolean,
    holder: BlockHolder | null,
  ) {
    this.address = address;
    // Frozen by whoever made it (the source Tensor's, or a cached [n]).
    this.shape = this.#shape = shape;
    this.dtype = dtype;
    this.deviceIndex = device;
    this.device = deviceName(device);
    this.byteLength = byteLength;
    this.block = block;
    this.offset = offset;
    this.packed = packed;
    // The holder is reachable only through its tensors: when the last one is
    // collected without dispose(), the holder's own finalizer frees the block.
    this.#holder = holder;
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
  static empty(shape: readonly number[], dtype: DType, device: Device | number): DeviceTensor {
    return allocate("empty", shape, dtype, device, false);
  }

  /** Like {@link DeviceTensor.empty}, with every byte zero. */
  static zeros(shape: readonly number[], dtype: DType, device: Device | number): DeviceTensor {
    return allocate("zeros", shape, dtype, device, true);
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#disposed;
  }

  static {
    holderOf = (tensor) => tensor.#holder;
    setTensorBlockReader((value) => value instanceof DeviceTensor ? (value.#holder?.block ?? 0) : undefined);
    constructedDeviceShape = (tensor) => tensor.#shape;
    settleDeviceTensor = (tensor, address, block, offset, packed, holder) => {
      const t = tensor as { -readonly [K in "address" | "block" | "offset" | "packed"]: DeviceTensor[K] };
      t.address = address;
      t.block = block;
      t.offset = offset;
      t.packed = packed;
      tensor.#holder = holder;
    };
  }

  /**
   * Copies the tensor back to host memory, blocking until done, into a fresh
   * ArrayBuffer-backed array: a plain typed array for 1-D tensors of a dtype
   * that a typed array kind stands for (float32 → Float32Array, int64 →
   * BigInt64Array, float16 → Float16Array where the runtime has it), a
   * {@link Tensor} otherwise (other shapes; bool as Uint8Array, bfloat16 and
   * float16 without Float16Array as Uint16Array, complex64 and complex128 as
   * interleaved Float32Array and Float64Array). Use {@link toTensor} for a
   * Tensor always.
   */
  toHost(): TypedArray | Tensor {
    if (copyToHost === null) {
      throw new MtcError(Status.MTC_ERR_INTERNAL, "toHost: the copy module is not loaded (import the library through mod.ts)");
    }
    return copyToHost(this);
  }

  /** Like {@link toHost}, but always a Tensor with this tensor's shape and dtype. */
  toTensor(): Tensor {
    return asTensor(this.toHost(), this.shape, this.dtype);
  }

  /** Gives this tensor's share of its block back. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    const holder = this.#holder;
    this.#holder = null;
    if (holder !== null) holder.drop();
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
  const extents = shape.slice(); // each extent read once: what is checked is what is kept
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
  return new DeviceTensor(address, frozenShape(extents), dtype, ordinal, bytes, block, 0, false, holder);
}

function asTensor(value: TypedArray | Tensor, shape: readonly number[], dtype: DType): Tensor {
  return value instanceof Tensor ? value : new Tensor(value, shape, dtype);
}
