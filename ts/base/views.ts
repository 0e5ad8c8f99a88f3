/**
 * Typed arrays and ArrayBuffers as the engine keeps them. `byteLength`,
 * `buffer`, `transfer` and the like live on the shared prototypes, so an
 * own property of one object (`Object.defineProperty(a, "byteLength", ...)`)
 * can shadow them: a copy that believed it would read or write past the
 * array, and a release that believed a buffer detached would free memory
 * its views still show. These call the engine's getters and methods.
 *
 * @module
 */

const TYPED_ARRAY_PROTOTYPE = Object.getPrototypeOf(Uint8Array.prototype) as object;

function getterOf<T>(prototype: object, name: string | symbol): (this: unknown) => T {
  return Object.getOwnPropertyDescriptor(prototype, name)!.get as (this: unknown) => T;
}

const BYTE_LENGTH = getterOf<number>(TYPED_ARRAY_PROTOTYPE, "byteLength");
const BUFFER = getterOf<ArrayBufferLike>(TYPED_ARRAY_PROTOTYPE, "buffer");
const BYTE_OFFSET = getterOf<number>(TYPED_ARRAY_PROTOTYPE, "byteOffset");
const TAG = getterOf<string | undefined>(TYPED_ARRAY_PROTOTYPE, Symbol.toStringTag);
const DATA_VIEW_BUFFER = getterOf<ArrayBufferLike>(DataView.prototype, "buffer");
const DETACHED = getterOf<boolean>(ArrayBuffer.prototype, "detached");
const RESIZABLE = getterOf<boolean>(ArrayBuffer.prototype, "resizable");
const BUFFER_BYTE_LENGTH = getterOf<number>(ArrayBuffer.prototype, "byteLength");
const SHARED_BYTE_LENGTH = getterOf<number>(SharedArrayBuffer.prototype, "byteLength");
type View = ArrayBufferView;
const SLICE = (TYPED_ARRAY_PROTOTYPE as { slice(this: View): View }).slice;
const SUBARRAY = (TYPED_ARRAY_PROTOTYPE as { subarray(this: View, begin: number, end: number): View }).subarray;
const AT = (TYPED_ARRAY_PROTOTYPE as { at(this: View, index: number): unknown }).at;
const TRANSFER = (ArrayBuffer.prototype as unknown as { transfer(this: ArrayBuffer, length: number): ArrayBuffer }).transfer;

/** The typed array's byte length, or -1 when `value` is no typed array (a DataView, anything else). */
export function viewByteLength(value: unknown): number {
  try {
    return BYTE_LENGTH.call(value);
  } catch {
    return -1; // the getter throws for anything but a typed array
  }
}

/** The typed array's byte offset in its buffer. */
export function viewByteOffset(view: ArrayBufferView): number {
  return BYTE_OFFSET.call(view);
}

/** The typed array's buffer (in Bun, reading it moves a small array's storage out of the moving heap). */
export function viewBuffer(view: ArrayBufferView): ArrayBufferLike {
  return BUFFER.call(view);
}

/** The buffer under a typed array or a DataView, or undefined for anything else. */
export function bufferUnder(value: unknown): ArrayBufferLike | undefined {
  if (!ArrayBuffer.isView(value)) return undefined;
  return viewByteLength(value) >= 0 ? BUFFER.call(value) : DATA_VIEW_BUFFER.call(value);
}

/**
 * The typed array kind the engine made `value` as ("Float32Array", also for
 * a subclass), or undefined for anything else (a DataView, a plain object).
 */
export function viewKind(value: unknown): string | undefined {
  return TAG.call(value);
}

const KIND_BYTES: Readonly<Record<string, number>> = {
  Int8Array: 1, Uint8Array: 1, Uint8ClampedArray: 1, Int16Array: 2, Uint16Array: 2, Float16Array: 2,
  Int32Array: 4, Uint32Array: 4, Float32Array: 4, Float64Array: 8, BigInt64Array: 8, BigUint64Array: 8,
};

/** Bytes per element of the typed array as the engine made it (never an own BYTES_PER_ELEMENT). */
export function viewElementBytes(view: ArrayBufferView): number {
  return KIND_BYTES[viewKind(view) ?? ""] ?? 1;
}

/** A copy of the typed array on a fixed-length buffer of its own (its kind, its elements). */
export function viewSlice<T extends ArrayBufferView>(view: T): T {
  return SLICE.call(view) as T;
}

/** The typed array's elements [begin, end) as a view of the same kind and memory. */
export function viewSubarray<T extends ArrayBufferView>(view: T, begin: number, end: number): T {
  return SUBARRAY.call(view, begin, end) as T;
}

/**
 * True for a resizable ArrayBuffer, whose memory can go while a view of it
 * is read; false for a fixed one and for a SharedArrayBuffer (which never
 * shrinks).
 */
export function isResizable(buffer: ArrayBufferLike): boolean {
  try {
    return RESIZABLE.call(buffer);
  } catch {
    return false; // a SharedArrayBuffer: the getter is ArrayBuffer's own
  }
}

/** True when the ArrayBuffer was detached (transferred); false for a SharedArrayBuffer, which never is. */
export function isDetached(buffer: ArrayBufferLike): boolean {
  try {
    return DETACHED.call(buffer);
  } catch {
    return false; // a SharedArrayBuffer: the getter is ArrayBuffer's own
  }
}

/** The buffer's byte length now (an ArrayBuffer's or a SharedArrayBuffer's). */
export function bufferByteLength(buffer: ArrayBufferLike): number {
  try {
    return BUFFER_BYTE_LENGTH.call(buffer);
  } catch {
    return SHARED_BYTE_LENGTH.call(buffer);
  }
}

/**
 * True for a fixed-length typed array that its resizable ArrayBuffer shrank
 * past: it reads as empty, and the engine refuses to read it.
 */
export function isOutOfBounds(view: ArrayBufferView): boolean {
  try {
    AT.call(view, 0); // throws only when the view is out of bounds (or detached)
    return false;
  } catch {
    return true;
  }
}

/** Detaches the ArrayBuffer: every view of it reads as empty from now on. */
export function detach(buffer: ArrayBuffer): void {
  TRANSFER.call(buffer, 0);
}
