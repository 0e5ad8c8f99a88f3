/**
 * The message of a moved result (move.ts sends it, take.ts takes it): one
 * plain object, cheap to clone. The result's containers travel as a
 * template, a JSON string that the receiver parses once per distinct
 * structure and keeps; the leaves as rows of numbers in `nums` (FIELDS
 * each) with their shapes in `dims`; everything else (numbers, strings,
 * pageable typed arrays, Map keys) in `data`, cloned. `blocks` lists the
 * C blocks (four numbers each: block, ref, base address and bytes of a
 * pinned buffer, or 0 and 0 for device memory), whose refs belong to the
 * parcel until it is taken.
 *
 * The template is an array of containers, numbered breadth first, each
 * once: [kind, ...entries]. An array's entries are codes, an object's are
 * key and code pairs, a Map's are key code and value code pairs. A code is
 * a container's number, LEAF (the next leaf) or DATA (the next value of
 * `data`); both sides visit entries in the same order.
 *
 * @module
 */

import { MtcError, Status, type StatusName } from "../base/errors.ts";
import type { TypedArray } from "../tensor/dtype.ts";

export const MOVED = "mtc.moved";

/** Codes of the template. */
export const LEAF = -1;
export const DATA = -2;

/** Container kinds. */
export const ARRAY = 0;
export const OBJECT = 1;
export const MAP = 2;
export const BARE_OBJECT = 3;

/** Leaf kinds. */
export const DEVICE = 0;
export const PINNED = 1;
export const TENSOR = 2;

/** Leaf flags. */
export const PACKED = 1;
export const KEEPS_TENSOR = 2;
export const NATURAL = 4;

/** The fields of a leaf's row in `nums`. a, b: device (address, offset in block); pinned (byte offset, elements). */
export const F = { kind: 0, block: 1, a: 2, b: 3, bytes: 4, device: 5, dtype: 6, flags: 7, ndim: 8 } as const;
export const FIELDS = 9;

/** A Tensor's layout (and, for pageable memory, its elements: cloned with the message). */
export interface TensorExtra {
  /** A pageable Tensor's elements. */
  data?: TypedArray;
  /** Its strides, or undefined when dense. */
  strides: readonly number[] | undefined;
  /** Its offset in elements. */
  offset: number;
}

/** An error as it crosses threads. */
export interface MovedError {
  /** The error's name ("MtcError", "TypeError", ...). */
  name: string;
  /** Its message. */
  message: string;
  /** The sender's stack. */
  stack: string | undefined;
  /** An MtcError's status. */
  status?: number;
  /** An MtcError's code. */
  code?: StatusName;
  /** An MtcError's leaf path. */
  path?: string;
  /** The cause, as text. */
  cause?: string;
}

/**
 * A moved result: a plain, structured-cloneable message (post it as it is).
 * Take it on the receiving thread with takeResult, once.
 */
export interface Moved<T = unknown> {
  /** Says what the message is: "mtc.moved". */
  readonly mtc: "mtc.moved";
  /** The parcel with the C references (0: none). */
  readonly parcel: number;
  /** The sending thread's owner. */
  readonly sender: number;
  /** The root: a container's number (0), LEAF or DATA. */
  readonly root?: number;
  /** The containers (JSON; see the module's text). */
  readonly template?: string;
  /** The leaves, FIELDS numbers each. */
  readonly nums?: Float64Array;
  /** The leaves' shapes, one after another. */
  readonly dims?: Float64Array;
  /** Everything that is neither a container nor a leaf, in the order of the walk. */
  readonly data?: unknown[];
  /** Per leaf, a Tensor's layout (and a pageable one's elements), or null; null when no leaf has one. */
  readonly extras?: (TensorExtra | null)[] | null;
  /** The blocks: block, ref, base address, pinned bytes (0 for device memory), four numbers each. */
  readonly blocks?: Float64Array;
  /** A moved error, instead of a value. */
  readonly error?: MovedError;
  /** Never set: carries T for the type of takeResult. */
  readonly __value?: T;
}

/** True for a message of moveResult (as posted, or as received). */
export function isMoved(x: unknown): x is Moved {
  return typeof x === "object" && x !== null && (x as { mtc?: unknown }).mtc === MOVED;
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
