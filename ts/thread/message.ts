/**
 * The message of a moved result (move.ts sends it, take.ts takes it): one
 * plain object, cheap to clone. The result's containers travel as a
 * template, a JSON string that the receiver checks and parses once per
 * distinct structure and keeps; the leaves as rows of numbers in `nums`
 * (FIELDS each) with their shapes in `dims`; everything else (numbers,
 * strings, pageable typed arrays, Map keys) in `data`, cloned. The C
 * references travel in a parcel, named by its id: no address or size is in
 * the message. A leaf names its block by its index among the parcel's
 * references (the order the parcel was given them), and where it lies in
 * it; the receiver asks C what each block is and checks every row against
 * that, since a message is untrusted input (edited, kept from another
 * process, or forged).
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

/**
 * The fields of a leaf's row in `nums`. block: its index among the parcel's
 * references, -1 for none (an empty DeviceTensor, a pageable Tensor);
 * offset: bytes from the block's first (a DeviceTensor's address, a pinned
 * view's first byte); length: a pinned view's array length; device: a
 * DeviceTensor's; dtype: its index in DTYPES.
 */
export const F = { kind: 0, block: 1, offset: 2, length: 3, device: 4, dtype: 5, flags: 6, ndim: 7 } as const;
export const FIELDS = 8;

/** A Tensor's layout (and, for pageable memory, its elements: cloned with the message). */
export interface TensorExtra {
  /** A pageable Tensor's elements. */
  data?: TypedArray;
  /** Its strides, or undefined when dense. */
  strides: readonly number[] | undefined;
  /** Its offset in elements. */
  offset: number;
}

/** A prepared layout as it travels with the first message of it (parcel_out.ts writes it, parcel_take.ts checks it). */
export interface LayoutShape {
  /** The containers, as this module describes a template (JSON). */
  readonly template: string;
  /** The root: 0 (a container), LEAF or DATA. */
  readonly root: number;
  /** Per leaf, in the template's order: its index in the plan, dtype code, flags (KEEPS_TENSOR), dimensions. */
  readonly rows: Float64Array;
  /** The leaves' shapes, one after another. */
  readonly dims: Float64Array;
}

/** Numbers per leaf in LayoutShape.rows. */
export const LAYOUT_FIELDS = 4;

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
  /**
   * The built-in class the error was made of, when not Error itself
   * ("TypeError", "DOMException", ...; a class of the caller's that extends
   * RangeError says "RangeError"): the receiver makes one of that class.
   */
  builtin?: BuiltinErrorName;
}

/** The name of a built-in error class a moved error keeps. */
export type BuiltinErrorName = "TypeError" | "RangeError" | "SyntaxError" | "ReferenceError" | "EvalError" | "URIError" | "AggregateError" | "DOMException";

/**
 * The built-in error classes an error keeps across threads, by name; typed
 * as plain error classes, so that the package's declarations need no DOM
 * types (DOMException, made apart below, takes a name, not options).
 */
const BUILTIN_ERRORS: Readonly<Record<BuiltinErrorName, ErrorConstructor>> = {
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  AggregateError: AggregateError as unknown as ErrorConstructor,
  DOMException: DOMException as unknown as ErrorConstructor,
};

/** The nearest built-in class (other than Error) on `error`'s prototype chain, or undefined. */
function builtinOf(error: Error): BuiltinErrorName | undefined {
  for (let proto = Object.getPrototypeOf(error); proto !== null && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const [name, builtin] of Object.entries(BUILTIN_ERRORS)) {
      if (proto === builtin.prototype) return name as BuiltinErrorName;
    }
  }
  return undefined;
}

/**
 * A moved result: a plain, structured-cloneable message (post it as it is).
 * Take it on the receiving thread with takeResult, once. The receiver
 * trusts nothing in it: an edited, stale or forged message is refused.
 */
export interface Moved<T = unknown> {
  /** Says what the message is: "mtc.moved". */
  readonly mtc: "mtc.moved";
  /** The parcel: an id that C checks, taken once (0 only where libmtc has no parcels). */
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
  /** A prepared copy moved while it runs (parcel_out.ts): its layout's id; the parcel then holds the copy's plan. */
  readonly layout?: number;
  /** That layout, with the first message of it. */
  readonly shape?: LayoutShape;
  /** A moved error, instead of a value. */
  readonly error?: MovedError;
  /** Never set: carries T for the type of takeResult. */
  readonly __value?: T;
}

/** True for a message of moveResult (as posted, or as received). */
export function isMoved(x: unknown): x is Moved {
  return typeof x === "object" && x !== null && (x as { mtc?: unknown }).mtc === MOVED;
}

/** The error for a message that is not what moveResult makes: `what` says what is wrong. */
export function damaged(call: string, what: string, path?: string): MtcError {
  return new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `${call}: the message is damaged (not as moveResult made it): ${what}`, { path });
}

/**
 * `read()`, where reading a message runs code of the caller's (a getter, a
 * Proxy trap): what that code throws becomes an MtcError saying the
 * message could not be read. All such reads come before anything is taken.
 */
export function readingMessage<T>(call: string, read: () => T): T {
  try {
    return read();
  } catch (cause) {
    if (cause instanceof MtcError) throw cause;
    throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `${call}: the message could not be read (reading it threw ${thrownText(cause)})`, { cause });
  }
}

/** What was thrown, for a message: its name and text where they can be read without throwing. */
function thrownText(thrown: unknown): string {
  try {
    if (thrown instanceof Error) return `${String(thrown.name)}: ${String(thrown.message)}`;
  } catch {
    // an Error-like Proxy, or getters that throw again
  }
  return typeof thrown === "object" && thrown !== null ? "an object" : shown(thrown);
}

/** A value of a message, for errors: short, and without running any of its code. */
export function shown(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  if (typeof value === "bigint") return `${value}n`;
  return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value;
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
  const builtin = builtinOf(error);
  if (builtin !== undefined && !(error instanceof MtcError)) out.builtin = builtin;
  return out;
}

/** A message's error, each field read once and checked (strings, an integer status); throws MtcError. */
export function checkedError(error: unknown): MovedError {
  const bad = (what: string) => damaged("takeResult", `its error ${what}`);
  if (typeof error !== "object" || error === null) throw bad(`is ${shown(error)}, not an object`);
  const { name, message, stack, status, code, path, cause, builtin } = error as Record<string, unknown>;
  if (typeof name !== "string" || typeof message !== "string") throw bad("has no name and message (strings)");
  const text = (x: unknown) => x === undefined || typeof x === "string";
  if (!text(stack) || !text(code) || !text(path) || !text(cause)) throw bad("has a stack, code, path or cause that is not a string");
  if (status !== undefined && !Number.isSafeInteger(status)) throw bad(`has status ${shown(status)}, not an integer`);
  const out: MovedError = { name, message, stack: stack as string | undefined };
  if (status !== undefined) out.status = status as number;
  if (code !== undefined) out.code = code as StatusName;
  if (path !== undefined) out.path = path as string;
  if (cause !== undefined) out.cause = cause as string;
  if (builtin !== undefined) {
    if (typeof builtin !== "string" || !Object.hasOwn(BUILTIN_ERRORS, builtin)) throw bad(`has builtin ${shown(builtin)}, not a built-in error class`);
    out.builtin = builtin as BuiltinErrorName;
  }
  return out;
}

/** The error a MovedError (checked) describes, with the sender's stack. */
export function errorFromMessage(m: MovedError): Error {
  let error: Error;
  if (m.status !== undefined) {
    const where = m.path === undefined ? "" : `${m.path === "" ? "(root)" : m.path}: `;
    const bare = m.message.startsWith(where) ? m.message.slice(where.length) : m.message;
    error = new MtcError(m.status, bare, { path: m.path, cause: m.cause });
  } else if (m.builtin === "DOMException") {
    // Its name says which exception (AbortError, DataCloneError, ...) and gives its legacy code.
    error = new DOMException(m.message, m.name);
    if (m.cause !== undefined) Object.defineProperty(error, "cause", { value: m.cause, writable: true, configurable: true });
  } else {
    const options = m.cause === undefined ? undefined : { cause: m.cause };
    error = m.builtin === "AggregateError"
      ? new AggregateError([], m.message, options) // its errors stay behind (docs/LOADER.md says so)
      : new (m.builtin === undefined ? Error : BUILTIN_ERRORS[m.builtin])(m.message, options);
    // A class of the caller's keeps its name (the class itself cannot cross).
    if (error.name !== m.name) error.name = m.name;
  }
  if (m.stack !== undefined) Object.defineProperty(error, "stack", { value: m.stack, writable: true, configurable: true });
  return error;
}

/** A template checked: its containers, and how many leaves and data values they hold. */
export interface Template {
  readonly containers: readonly (readonly (string | number)[])[];
  readonly leaves: number;
  readonly data: number;
}

/** Checked templates by their text, least recently used first; a loader sends one structure again and again. */
const templates = new Map<string, Template>();
const MAX_TEMPLATES = 256;

/** The template of `text`, parsed and checked (once per distinct text while it is kept); throws MtcError. */
export function checkedTemplate(text: string): Template {
  let template = templates.get(text);
  if (template === undefined) {
    template = checkTemplate(text);
    if (templates.size >= MAX_TEMPLATES) templates.delete(templates.keys().next().value!);
  } else templates.delete(text);
  templates.set(text, template);
  return template;
}

/**
 * Parses and checks a template: an array of containers of known kinds,
 * their codes in range, keys strings (each once per object), Map keys data,
 * and the containers numbered as the sender numbers them (breadth first: a
 * code names a container seen before or the next one), so each is reached
 * from the root.
 */
function checkTemplate(text: string): Template {
  const bad = (what: string) => damaged("takeResult", `its template ${what}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw bad("is not JSON");
  }
  if (!Array.isArray(parsed)) throw bad("is not an array of containers");
  const count = parsed.length;
  let numbered = count > 0 ? 1 : 0; // the root is container 0
  let leaves = 0;
  let data = 0;
  for (let c = 0; c < count; c++) {
    const entries: unknown = parsed[c];
    if (!Array.isArray(entries) || entries.length === 0) throw bad(`has container ${c} that is not [kind, ...entries]`);
    if (c >= numbered) throw bad(`has container ${c} that no container before it holds`);
    const kind = entries[0];
    if (kind !== ARRAY && kind !== OBJECT && kind !== MAP && kind !== BARE_OBJECT) throw bad(`has container ${c} of kind ${shown(kind)}`);
    const pairs = kind !== ARRAY;
    if (pairs && entries.length % 2 === 0) throw bad(`has container ${c} with a key and no value`);
    const keys = kind === OBJECT || kind === BARE_OBJECT ? new Set<string>() : null;
    for (let i = 1; i < entries.length; i++) {
      const e: unknown = entries[i];
      if (pairs && i % 2 === 1) {
        if (keys === null ? e !== DATA : typeof e !== "string" || keys.has(e)) throw bad(`has container ${c} with key ${shown(e)} at ${i}`);
        if (keys === null) data++;
        else keys.add(e as string);
      } else if (e === LEAF) leaves++;
      else if (e === DATA) data++;
      else if (typeof e === "number" && Number.isInteger(e) && e >= 0 && e <= numbered && e < count) {
        if (e === numbered) numbered++;
      } else throw bad(`has container ${c} with code ${shown(e)} at ${i}`);
    }
  }
  return { containers: parsed as (string | number)[][], leaves, data };
}

/** The path of leaf `leaf` (as a walk writes it: ".a[0]"), for errors; "" for a root leaf. */
export function leafPath(template: Template, root: number, leaf: number): string {
  if (root === LEAF) return "";
  const paths: string[] = [""];
  let n = 0;
  for (let c = 0; c < template.containers.length; c++) {
    const entries = template.containers[c]!;
    const pairs = entries[0] !== ARRAY;
    for (let i = pairs ? 2 : 1; i < entries.length; i += pairs ? 2 : 1) {
      const slot = entries[0] === ARRAY ? `[${i - 1}]` : entries[0] === MAP ? `[${(i - 2) / 2}]` : `.${String(entries[i - 1])}`;
      const code = entries[i] as number;
      if (code === LEAF && n++ === leaf) return paths[c] + slot;
      if (code >= 0 && paths[code] === undefined) paths[code] = paths[c] + slot;
    }
  }
  return "";
}
