/**
 * DLPack 1.x interop: a {@link DeviceTensor} handed to another library as
 * the address of a `DLManagedTensorVersioned`, and another library's tensor
 * taken in as a DeviceTensor (CUDA memory) or a host {@link Tensor}, viewing
 * its memory without a copy.
 *
 * Ownership follows DLPack: whoever holds a managed tensor calls its deleter
 * once. {@link toDLPack} gives the caller a new one (it holds its own
 * reference to the libmtc block, so disposing the DeviceTensor does not free
 * the memory under it); {@link fromDLPack} takes one over and calls its
 * deleter when the result is released.
 *
 * @module
 */

import { BlockHolder } from "../gpu/block.ts";
import { DeviceTensor, holderOf, isDeviceTensor, makeDeviceTensor, notADeviceTensor, tensorDisposed, tensorDType, tensorOffset, tensorShape } from "./device_tensor.ts";
import { bufferUnder, detach, isDetached } from "../base/views.ts";
import { allocateStorage, type DType, DTYPE_SIZE, type TypedArray, viewStorage } from "./dtype.ts";
import { invalidArgument, MtcError, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { frozenShape } from "./shape.ts";
import { markReleased, Tensor } from "./tensor.ts";

// DLDataTypeCode values (dlpack.h).
const INT = 0;
const UINT = 1;
const FLOAT = 2;
const BFLOAT = 4;
const COMPLEX = 5;
const BOOL = 6;

const DLPACK_CODE: Readonly<Record<DType, number>> = {
  bool: BOOL,
  int8: INT,
  int16: INT,
  int32: INT,
  int64: INT,
  uint8: UINT,
  uint16: UINT,
  uint32: UINT,
  uint64: UINT,
  float16: FLOAT,
  bfloat16: BFLOAT,
  float32: FLOAT,
  float64: FLOAT,
  complex64: COMPLEX,
  complex128: COMPLEX,
};

const CODE_NAMES = ["int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"];

/** The DType of a DLPack (code, bits), or undefined where there is none here. */
function dtypeOf(code: number, bits: number): DType | undefined {
  for (const [dtype, c] of Object.entries(DLPACK_CODE) as [DType, number][]) {
    if (c === code && DTYPE_SIZE[dtype] * 8 === bits) return dtype;
  }
  return undefined;
}

// Offsets in DLManagedTensorVersioned (80 bytes, DLPack 1.x).
const MANAGED_BYTES = 80;
const AT_NDIM = 48;
const AT_CODE = 52;
const AT_BITS = 53;
const AT_LANES = 54;
const AT_SHAPE = 56;

// Offsets in mtc_leaf (40 bytes).
const LEAF_BYTES = 40;
const LEAF_ADDRESS = 0;
const LEAF_BYTE_COUNT = 8;
const LEAF_DEVICE = 24;
const LEAF_ROW_COUNT = 32;

function fail(status: number, what: string): MtcError {
  return new MtcError(status, `${what}: ${library().symbols.mtc_last_error() || statusName(status)}`);
}

function deleteManaged(managed: number): void {
  library().symbols.mtc_dlpack_delete?.(managed);
}

/**
 * Exports a DeviceTensor as a new DLPack tensor and returns its address
 * (a `DLManagedTensorVersioned *`): data is the tensor's first element,
 * strides are row-major, the device is kDLCUDA and its ordinal. The managed
 * tensor holds its own reference to the memory, so the DeviceTensor may be
 * disposed at once. Hand the address to a consumer, which calls its deleter
 * once when done, or free it with {@link deleteDLPack}.
 *
 * Throws MtcError for a disposed or empty tensor (there is no memory to
 * export), for one made by {@link fromDLPack} (hand over the original), and
 * MTC_ERR_UNSUPPORTED where the loaded libmtc lacks DLPack.
 *
 * @example
 * ```ts
 * const onGpu = await startCopy(new Float32Array([1, 2, 3]), "cuda:0");
 * const managed = toDLPack(onGpu); // give it to a consumer, e.g. over FFI
 * onGpu.dispose();                 // the managed tensor keeps the memory
 * ```
 */
export function toDLPack(tensor: DeviceTensor): number {
  if (!(tensor instanceof DeviceTensor)) {
    throw invalidArgument("toDLPack takes a DeviceTensor (host arrays have no libmtc block to lend)");
  }
  if (!isDeviceTensor(tensor)) throw notADeviceTensor(undefined, "toDLPack: the argument is ");
  if (tensorDisposed(tensor)) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "toDLPack: the DeviceTensor was disposed");
  const holder = holderOf(tensor);
  if (holder instanceof DLPackHolder) {
    throw invalidArgument("toDLPack: this DeviceTensor came from fromDLPack; hand over the original DLPack tensor instead");
  }
  // What the managed tensor says comes from the tensor's private state, not its getters.
  const dims = tensorShape(tensor);
  const dtypeOfTensor = tensorDType(tensor);
  if (holder === null || holder.block === 0) {
    throw invalidArgument(`toDLPack: the DeviceTensor is empty (shape [${dims.join(", ")}]): no memory to export`);
  }
  const toDlpack = requireSymbol("mtc_block_to_dlpack", "DLPack tensors");
  const shape = BigInt64Array.from(dims, (n) => BigInt(n));
  const dtype = new Uint8Array([DLPACK_CODE[dtypeOfTensor], DTYPE_SIZE[dtypeOfTensor] * 8, 1, 0]);
  const out = new BigUint64Array(1);
  const status = toDlpack(holder.block, tensorOffset(tensor), shape, dims.length, dtype, 0, out);
  if (status !== Status.MTC_OK) throw fail(status, "toDLPack");
  return Number(out[0]);
}

/**
 * Frees a DLPack tensor nobody took over: calls its deleter (for an address
 * from {@link toDLPack} that was not handed to a consumer). Once per tensor.
 */
export function deleteDLPack(address: number | bigint): void {
  requireSymbol("mtc_dlpack_delete", "DLPack tensors")(managedAddress(address, "deleteDLPack"));
}

function managedAddress(address: number | bigint, what: string): number {
  const value = typeof address === "bigint" ? Number(address) : address;
  if (!Number.isSafeInteger(value) || value <= 0 || (typeof address === "bigint" && BigInt(value) !== address)) {
    throw invalidArgument(`${what}: ${String(address)} is not the address of a DLManagedTensorVersioned`);
  }
  return value;
}

// --------------------------------------------------------------- import

/** Backstop for imported device tensors dropped without dispose(): calls the deleter. */
const deviceRegistry = new FinalizationRegistry<number>(deleteManaged);

/**
 * The owner of an imported CUDA tensor: no libmtc block (block 0, so the
 * base class's retain and release are no-ops); the last share calls the
 * producer's deleter instead. Copies that read the tensor hold a share, as
 * for libmtc's own blocks.
 */
class DLPackHolder extends BlockHolder {
  readonly managed: number;

  constructor(managed: number) {
    super(0);
    this.managed = managed;
    deviceRegistry.register(this, managed, this);
  }

  override drop(): void {
    super.drop();
    if (this.shares < 0) {
      deviceRegistry.unregister(this);
      deleteManaged(this.managed);
    }
  }
}

/** Imported host memory: the ArrayBuffer over it, and whose deleter frees it. */
interface HostImport {
  readonly managed: number;
}

const hostImports = new WeakMap<ArrayBuffer, HostImport>();
const hostRegistry = new FinalizationRegistry<number>(deleteManaged);

/**
 * Takes over the DLPack tensor at `address` (a `DLManagedTensorVersioned *`
 * made by another library) and returns a view of its memory, not a copy:
 * - kDLCUDA: a {@link DeviceTensor} on "cuda:N" that can be copied with
 *   `startCopy` like any other; its dispose() (or garbage collection, as a
 *   backstop, or the end of the last copy reading it) calls the deleter;
 * - kDLCPU, kDLCUDAHost: a host {@link Tensor} whose data views the memory;
 *   {@link releaseDLPack} (or garbage collection of the data's buffer) calls
 *   the deleter.
 *
 * The tensor must be row-major contiguous, of a dtype that {@link DType}
 * names, and DLPack 1.x. On an error the tensor stays the caller's (its
 * deleter is not called); on success it is the result's.
 *
 * @example
 * ```ts
 * const t = fromDLPack(addressFromOtherLibrary); // DeviceTensor [2, 3] float32 on cuda:0
 * const copies = await startCopy({ t }, "cuda:1");
 * t.dispose();                                   // the other library's deleter runs
 * ```
 */
export function fromDLPack(address: number | bigint): DeviceTensor | Tensor {
  const managed = managedAddress(address, "fromDLPack");
  const lib = library();
  const leaf = new Uint8Array(LEAF_BYTES);
  const status = requireSymbol("mtc_leaf_from_dlpack", "DLPack tensors")(managed, leaf);
  if (status !== Status.MTC_OK) throw fail(status, "fromDLPack");
  const leafView = new DataView(leaf.buffer);
  if (leafView.getUint32(LEAF_ROW_COUNT, true) > 1) {
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      "fromDLPack: the tensor is rows of contiguous elements with gaps between them; fromDLPack views dense tensors only (make it contiguous first)",
    );
  }

  const header = new Uint8Array(MANAGED_BYTES);
  lib.backend.copyFromAddress(managed, header);
  const view = new DataView(header.buffer);
  const code = view.getUint8(AT_CODE);
  const bits = view.getUint8(AT_BITS);
  const dtype = view.getUint16(AT_LANES, true) === 1 ? dtypeOf(code, bits) : undefined;
  if (dtype === undefined) {
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `fromDLPack: DLPack dtype ${CODE_NAMES[code] ?? `code ${code}`} of ${bits} bits has no dtype here ` +
        "(bool, int8-64, uint8-64, float16/32/64, bfloat16, complex64/128)",
    );
  }
  const ndim = view.getInt32(AT_NDIM, true);
  const dims = new BigInt64Array(ndim);
  lib.backend.copyFromAddress(Number(view.getBigUint64(AT_SHAPE, true)), new Uint8Array(dims.buffer));
  const shape = frozenShape(Array.from(dims, (n) => Number(n)));

  const data = Number(leafView.getBigUint64(LEAF_ADDRESS, true));
  const bytes = Number(leafView.getBigUint64(LEAF_BYTE_COUNT, true));
  const device = leafView.getInt32(LEAF_DEVICE, true);
  if (device >= 0) {
    const holder = new DLPackHolder(managed);
    holder.acquire();
    return makeDeviceTensor(data, shape, dtype, device, bytes, 0, 0, false, holder);
  }
  if (bytes === 0) {
    deleteManaged(managed); // nothing to view
    return new Tensor(allocateStorage(dtype, 0), shape, dtype);
  }
  const buffer = lib.backend.externalBuffer(data, bytes);
  const record: HostImport = { managed };
  hostImports.set(buffer, record);
  hostRegistry.register(buffer, managed, record);
  return new Tensor(viewStorage(dtype, buffer, 0, bytes / DTYPE_SIZE[dtype])!, shape, dtype);
}

/**
 * Releases a tensor made by {@link fromDLPack} now: disposes a DeviceTensor;
 * for a host Tensor (or its data array), empties every view of the imported
 * memory (their buffer is detached) and calls the producer's deleter.
 * Returns false, doing nothing, for anything else or a second time.
 *
 * @example
 * ```ts
 * const host = fromDLPack(address) as Tensor<"float32">;
 * const sum = host.data.reduce((a, b) => a + b, 0);
 * releaseDLPack(host); // host.data is empty from here on
 * ```
 */
export function releaseDLPack(value: DeviceTensor | Tensor | TypedArray): boolean {
  if (value instanceof DeviceTensor) {
    // Not one of ours (no private state): nothing of fromDLPack's to release.
    if (!isDeviceTensor(value) || tensorDisposed(value) || !(holderOf(value) instanceof DLPackHolder)) return false;
    value.dispose();
    return true;
  }
  return releaseHostImport(value);
}

/** The host half of {@link releaseDLPack}: true if `value` viewed an imported host tensor, now released. */
export function releaseHostImport(value: Tensor | ArrayBufferView): boolean {
  const buffer = bufferUnder(value instanceof Tensor ? value.data : value) as ArrayBuffer | undefined;
  const record = buffer === undefined ? undefined : hostImports.get(buffer);
  if (buffer === undefined || record === undefined) return false;
  hostImports.delete(buffer);
  hostRegistry.unregister(record);
  // Detached first (by the engine's own transfer, whatever the buffer's own
  // properties say), so no view can read the memory once the producer frees it.
  if (!isDetached(buffer)) detach(buffer);
  markReleased(buffer, "memory imported with fromDLPack", "releaseDLPack or disposeAll");
  deleteManaged(record.managed);
  return true;
}
