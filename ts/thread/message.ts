/**
 * The message of a moved result (move.ts): one plain object, cheap to
 * clone. `root` mirrors the result's containers with null where each leaf
 * goes; the leaves are rows of numbers in `nums` (FIELDS each), their
 * shapes in `dims`, their slots in `slots`; `blocks` lists the C blocks
 * (four numbers each: block, ref, base address, bytes of a pinned buffer or
 * 0 for device memory), whose refs belong to the parcel until it is taken.
 * A leaf names its container by number: containers are numbered breadth
 * first, each once, which a structured clone keeps (order and sharing).
 *
 * @module
 */

import { MtcError, Status, type StatusName } from "../base/errors.ts";
import type { TypedArray } from "../tensor/dtype.ts";

export const MOVED = "mtc.moved";

/** Leaf kinds. */
export const DEVICE = 0;
export const PINNED = 1;
export const TENSOR = 2;

/** Leaf flags. */
export const PACKED = 1;
export const KEEPS_TENSOR = 2;
export const NATURAL = 4;

/** The fields of a leaf's row in `nums`. a, b: device (address, offset in block); pinned (byte offset, bytes). */
export const F = { kind: 0, container: 1, block: 2, a: 3, b: 4, bytes: 5, device: 6, dtype: 7, flags: 8, ndim: 9 } as const;
export const FIELDS = 10;

/** A Tensor's layout (and, for pageable memory, its elements: cloned with the message). */
export interface TensorExtra {
  data?: TypedArray;
  strides: readonly number[] | undefined;
  offset: number;
}

/** An error as it crosses threads. */
export interface MovedError {
  name: string;
  message: string;
  stack: string | undefined;
  status?: number;
  code?: StatusName;
  path?: string;
  cause?: string;
}

/**
 * A moved result: a plain, structured-cloneable message (post it as it is).
 * Take it on the receiving thread with takeResult, once.
 */
export interface Moved<T = unknown> {
  readonly mtc: typeof MOVED;
  /** The parcel with the C references (0: none). */
  readonly parcel: number;
  /** The sending thread's owner. */
  readonly sender: number;
  readonly root?: unknown;
  readonly nums?: Float64Array;
  readonly slots?: (string | number)[];
  readonly dims?: Float64Array;
  readonly extras?: (TensorExtra | null)[] | null;
  readonly blocks?: Float64Array;
  readonly error?: MovedError;
  /** Never set: carries T for the type of takeResult. */
  readonly __value?: T;
}

/** True for a message of moveResult (as posted, or as received). */
export function isMoved(x: unknown): x is Moved {
  return typeof x === "object" && x !== null && (x as { mtc?: unknown }).mtc === MOVED;
}

/** The containers of a received `root`, numbered as the sender numbered its mirror's. */
export function collectContainers(root: unknown): object[] {
  const queue: object[] = [];
  const seen = new Set<object>();
  const visit = (value: unknown) => {
    if (typeof value !== "object" || value === null || seen.has(value)) return;
    const proto = Object.getPrototypeOf(value);
    if (!Array.isArray(value) && !(value instanceof Map) && proto !== Object.prototype && proto !== null) return;
    seen.add(value);
    queue.push(value);
  };
  visit(root);
  for (let c = 0; c < queue.length; c++) {
    const container = queue[c]!;
    if (Array.isArray(container)) for (const v of container) visit(v);
    else if (container instanceof Map) for (const v of container.values()) visit(v);
    else for (const key of Object.keys(container)) visit((container as Record<string, unknown>)[key]);
  }
  return queue;
}

/** Maps' keys by entry index, for placing leaves (a Map slot is its entry's index). */
const mapKeys = new WeakMap<Map<unknown, unknown>, unknown[]>();

/** Puts a leaf at `slot` of `container`. */
export function placeLeaf(container: object, slot: string | number, value: unknown): void {
  if (container instanceof Map) {
    let keys = mapKeys.get(container);
    if (keys === undefined) mapKeys.set(container, keys = Array.from(container.keys()));
    container.set(keys[slot as number], value);
  } else {
    (container as Record<string | number, unknown>)[slot] = value;
  }
}

/** The path of `slot` in container `c` ("" for the root), as leaf paths are written (".a[0]"). */
export function movedPath(parents: number[], slots: (string | number)[], containers: object[], c: number, slot: string | number): string {
  const parts: string[] = [];
  let container = c;
  let at: string | number = slot;
  while (container >= 0) {
    const node = containers[container];
    parts.push(Array.isArray(node) || node instanceof Map ? `[${String(at)}]` : `.${String(at)}`);
    at = slots[container]!;
    container = parents[container]!;
  }
  return parts.reverse().join("");
}

/** `error` as it crosses threads: name, message, stack, and an MtcError's status, code and path. */
export function errorMessage(error: Error): MovedError {
  const out: MovedError = { name: error.name, message: error.message, stack: error.stack };
  if (error instanceof MtcError) {
    out.status = error.status;
    out.code = error.code;
    if (error.path !== undefined) out.path = error.path;
  }
  if (error.cause !== undefined) out.cause = String(error.cause instanceof Error ? error.cause.stack ?? error.cause : error.cause);
  return out;
}

/** The error a MovedError describes, with the sender's stack. */
export function errorFromMessage(m: MovedError): Error {
  let error: Error;
  if (m.status !== undefined) {
    const where = m.path === undefined ? "" : `${m.path === "" ? "(root)" : m.path}: `;
    const bare = m.message.startsWith(where) ? m.message.slice(where.length) : m.message;
    error = new MtcError(m.status ?? Status.MTC_ERR_INTERNAL, bare, { path: m.path, cause: m.cause });
  } else {
    error = new Error(m.message, m.cause === undefined ? undefined : { cause: m.cause });
    error.name = m.name;
  }
  if (m.stack !== undefined) error.stack = m.stack;
  return error;
}
