/**
 * Strided host tensors: checking a layout (strides and offset, in
 * elements) against its shape and storage, and the part of the storage a
 * copy reads. A Tensor keeps its strides only when they are not those of
 * its shape: a dense layout is stored as a plain dense Tensor.
 *
 * @module
 */

/** Most dimensions of extent > 1 a strided tensor may have (MTC_LAYOUT_MAX_RANK). */
export const MAX_STRIDED_RANK = 8;

/** Where the elements of a strided Tensor are, in elements of its storage. */
export interface TensorLayout {
  /**
   * Distance in elements between neighbours along each dimension, one per
   * dimension of the shape: integers >= 0 (0 repeats one element along
   * that dimension, as broadcasting does).
   */
  readonly strides?: readonly number[];
  /** Index in the storage of the first element (default 0). */
  readonly offset?: number;
}

/** A layout checked against a shape and a storage length. */
export interface CheckedLayout {
  /** Frozen strides, or undefined when the layout is dense. */
  readonly strides: readonly number[] | undefined;
  readonly offset: number;
}

/** The row-major strides of `shape`. */
export function denseStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d]!;
  }
  return strides;
}

/** True when `strides` step through `shape` as a dense row-major tensor does (extents of 1 step anywhere). */
export function isDenseLayout(shape: readonly number[], strides: readonly number[]): boolean {
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== step) return false;
    step *= shape[d]!;
  }
  return true;
}

/**
 * Why `strides` and `offset` cannot describe `count` elements of `shape`
 * in a storage of `length` elements, or null when they can: strides are
 * one integer >= 0 per dimension, the offset an integer >= 0, and every
 * element read lies in the storage (an empty tensor reads none).
 */
export function layoutProblem(
  shape: readonly number[],
  count: number,
  strides: readonly number[],
  offset: number,
  length: number,
): string | null {
  if (!Array.isArray(strides)) return `strides must be an array of integers >= 0, got ${typeof strides}`;
  if (strides.length !== shape.length) {
    return `strides [${strides.join(", ")}] have ${strides.length} entries but the shape [${shape.join(", ")}] has ${shape.length}`;
  }
  for (const stride of strides) {
    if (!Number.isSafeInteger(stride) || stride < 0) {
      return `invalid strides [${strides.join(", ")}]: strides must be integers >= 0 (in elements)`;
    }
  }
  if (!Number.isSafeInteger(offset) || offset < 0) return `invalid offset ${offset}: it must be an integer >= 0 (in elements)`;
  if (count === 0) {
    return offset <= length ? null : `offset ${offset} is past the end of the ${length}-element storage`;
  }
  let last = offset;
  for (let d = 0; d < shape.length; d++) last += (shape[d]! - 1) * strides[d]!;
  if (last >= length) {
    return `shape [${shape.join(", ")}] with strides [${strides.join(", ")}] and offset ${offset} ` +
      `reads element ${last}, outside the ${length}-element storage`;
  }
  return null;
}

/**
 * The storage elements a strided layout reads, as [begin, end) indices:
 * from its offset to its last element (count > 0).
 */
export function layoutSpan(shape: readonly number[], strides: readonly number[], offset: number): [number, number] {
  let last = offset;
  for (let d = 0; d < shape.length; d++) last += (shape[d]! - 1) * strides[d]!;
  return [offset, last + 1];
}

/**
 * A layout as the C library takes it (mtc_leaf_layout): dimensions of
 * extent 1 left out, since they never move the read (so up to
 * MAX_STRIDED_RANK others fit), and strides in bytes. A string says why it
 * does not fit.
 */
export function byteLayout(
  shape: readonly number[],
  strides: readonly number[],
  elementSize: number,
): { shape: number[]; byteStrides: number[] } | string {
  const extents: number[] = [];
  const byteStrides: number[] = [];
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    extents.push(shape[d]!);
    byteStrides.push(strides[d]! * elementSize);
  }
  if (extents.length > MAX_STRIDED_RANK) {
    return `a strided Tensor may have at most ${MAX_STRIDED_RANK} dimensions of extent > 1; this one has ${extents.length}`;
  }
  return { shape: extents, byteStrides };
}

/**
 * Why a Tensor without strides has an `offset` (as read) other than 0: its
 * data starts at element 0, and only a strided Tensor starts later. Undefined
 * when it is 0 (or absent).
 */
export function denseOffsetProblem(offset: unknown): string | undefined {
  if (offset === 0 || offset === undefined) return undefined;
  return `the Tensor has no strides but its offset is ${typeof offset === "number" ? offset : typeof offset}: ` +
    "only a strided Tensor starts past element 0 of its data (give strides with the offset)";
}
