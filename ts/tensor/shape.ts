/**
 * Shapes: frozen arrays, made once where a tensor is made and then shared
 * (a source Tensor, its DeviceTensor copies and their host outputs all hold
 * the same array), so that no copy has to copy or check a shape.
 *
 * Object.freeze costs 0.3-0.4 µs an array in JavaScriptCore (Bun), so the
 * common shapes, [n] and [m, n], come from caches of frozen arrays: being
 * immutable, one array serves every tensor of that shape.
 *
 * @module
 */

import { showValue } from "../base/errors.ts";

/** The scalar shape. */
export const SCALAR_SHAPE: readonly number[] = Object.freeze([]);

/** Entries kept per cache; a full cache starts over (shapes are cheap to make again). */
const CACHE_LIMIT = 4096;

const vectors = new Map<number, readonly number[]>();
const matrices = new Map<number, Map<number, readonly number[]>>();
let matrixCount = 0;

/** [n] for n below SMALL, by index: an array read is cheaper than a Map lookup in both engines. */
const SMALL = 4096;
const smallVectors: (readonly number[] | undefined)[] = new Array(SMALL).fill(undefined);

/** The frozen shape [n]. */
export function vectorShape(n: number): readonly number[] {
  if (n < SMALL && n >= 0 && Number.isInteger(n)) {
    return smallVectors[n] ??= Object.freeze([n]);
  }
  let shape = vectors.get(n);
  if (shape === undefined) {
    if (vectors.size >= CACHE_LIMIT) vectors.clear();
    shape = Object.freeze([n]);
    vectors.set(n, shape);
  }
  return shape;
}

export function matrixShape(m: number, n: number): readonly number[] {
  let rows = matrices.get(m);
  if (rows === undefined) {
    if (matrixCount >= CACHE_LIMIT) {
      matrices.clear();
      matrixCount = 0;
    }
    rows = new Map();
    matrices.set(m, rows);
  }
  let shape = rows.get(n);
  if (shape === undefined) {
    shape = Object.freeze([m, n]);
    rows.set(n, shape);
    matrixCount++;
  }
  return shape;
}

/**
 * A frozen array with the extents of `shape` (which the caller has checked:
 * integers >= 0). Never `shape` itself, unless it is one of ours already.
 */
export function frozenShape(shape: readonly number[]): readonly number[] {
  switch (shape.length) {
    case 0:
      return SCALAR_SHAPE;
    case 1:
      return vectorShape(shape[0]!);
    case 2:
      return matrixShape(shape[0]!, shape[1]!);
    default:
      return Object.freeze(shape.slice());
  }
}

/** Elements a shape describes (1 for a scalar), walking it once. */
export function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (let i = 0; i < shape.length; i++) count *= shape[i]!;
  return count;
}

/**
 * The frozen copy of a shape that did not come from a constructor (a
 * reassigned or forged field): undefined when it is no array of integers
 * >= 0 (the caller reports it).
 */
export function checkedShape(shape: unknown): readonly number[] | undefined {
  if (!Array.isArray(shape)) return undefined;
  const copy = shapeEntries(shape);
  return areExtents(copy) ? frozenShape(copy) : undefined;
}

/**
 * The caller's shape array copied into a plain array: its length and each
 * entry read once, so that what is checked is what is kept. A loop, not
 * slice(): slice of a frozen array (every shape of ours) costs 3-10 times
 * as much in both engines, and it would ask the array for its species.
 */
export function shapeEntries(shape: readonly unknown[]): unknown[] {
  const length = shape.length;
  const copy: unknown[] = [];
  for (let i = 0; i < length; i++) copy.push(shape[i]);
  return copy;
}

/** True when every entry of a plain array (the caller's shape, copied) is an extent: an integer >= 0. */
export function areExtents(values: readonly unknown[]): values is readonly number[] {
  for (const extent of values) {
    if (!Number.isSafeInteger(extent) || (extent as number) < 0) return false;
  }
  return true;
}

/**
 * A shape as the caller gave it, for messages: `["4", 2.5, null]`, a
 * string quoted so that "4" and 4 look different. `shape` is the caller's
 * copied into a plain array, so that showing it runs none of their code.
 */
export function showShape(shape: readonly unknown[]): string {
  let text = "[";
  for (let i = 0; i < shape.length; i++) text += (i === 0 ? "" : ", ") + showValue(shape[i]);
  return `${text}]`;
}

/** Why a shape of `dtype` with `count` elements is refused: its bytes are no exact number (more than 2^53 - 1). */
export function tooLarge(shape: readonly number[], dtype: string, count: number, elementSize: number): string | null {
  if (Number.isSafeInteger(count * elementSize)) return null;
  return `shape ${showShape(shape)} of ${dtype} is too large: its bytes are more than 2^53 - 1, the most a number holds exactly`;
}
