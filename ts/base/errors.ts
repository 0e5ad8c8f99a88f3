/**
 * The one error class of the library, and the status codes of the C ABI
 * (lib/include/mtc.h, `enum mtc_status`).
 *
 * @module
 */

import { defineInspect } from "./inspect.ts";

/**
 * Status values of `enum mtc_status`, by name.
 *
 * @example
 * ```ts
 * if (error instanceof MtcError && error.status === Status.MTC_ERR_NO_DEVICE) useCpu();
 * ```
 */
export const Status = {
  MTC_OK: 0,
  MTC_IN_PROGRESS: 1,
  MTC_ERR_INVALID_ARGUMENT: 2,
  MTC_ERR_INVALID_STATE: 3,
  MTC_ERR_NO_DRIVER: 4,
  MTC_ERR_NO_DEVICE: 5,
  MTC_ERR_OUT_OF_MEMORY: 6,
  MTC_ERR_CUDA: 7,
  MTC_ERR_UNSUPPORTED: 8,
  MTC_ERR_INTERNAL: 9,
} as const;

/** The name of a status, as `mtc_status_name` spells it. */
export type StatusName = keyof typeof Status | "MTC_UNKNOWN_STATUS";

const NAMES: readonly StatusName[] = Object.keys(Status) as StatusName[];

/**
 * The name of a status value ("MTC_ERR_INVALID_ARGUMENT", ...), or
 * "MTC_UNKNOWN_STATUS". Kept in TypeScript so that errors can be named even
 * when the C library could not be loaded.
 *
 * @example
 * ```ts
 * statusName(2); // "MTC_ERR_INVALID_ARGUMENT"
 * ```
 */
export function statusName(status: number): StatusName {
  return NAMES[status] ?? "MTC_UNKNOWN_STATUS";
}

/**
 * Every failure of the library: a C status (or the status the TypeScript side
 * chose for an error it found itself), its name, the path of the leaf it is
 * about, and a message that starts with that path.
 *
 * Paths: `[3]` is an array index, `.key` an object key (`["odd key"]` when the
 * key is not an identifier), `[<key>]` a Map key written as JSON when it is a
 * string, number, boolean or null (`["cam"]`, `[7]`), `[12n]` for a bigint and
 * `[String(key)]` otherwise. The root is the empty path "", shown as "(root)".
 *
 * @example
 * ```ts
 * try {
 *   startCopy({ a: [new Float32Array(4), Symbol()] }, parseDevice(args[0] ?? "gpu")); // "gpu" is no device
 * } catch (e) {
 *   if (e instanceof MtcError) console.log(e.code, e.path, e.message);
 * }
 * ```
 */
export class MtcError extends Error {
  /** The numeric `mtc_status`. */
  readonly status: number;
  /** The status name, e.g. "MTC_ERR_INVALID_ARGUMENT". */
  readonly code: StatusName;
  /** The path of the leaf the error is about, "" for the root, or undefined. */
  readonly path: string | undefined;

  /**
   * An error with `status` (an `mtc_status` value) and `message`; with
   * `options.path`, the message starts with that leaf path ("(root)" for
   * ""), and `options.cause` becomes the standard `cause`.
   */
  constructor(
    status: number,
    message: string,
    options?: { path?: string; cause?: unknown },
  ) {
    const path = options?.path;
    const where = path === undefined ? "" : `${path === "" ? "(root)" : path}: `;
    super(where + message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "MtcError";
    this.status = status;
    this.code = statusName(status);
    this.path = path;
  }

  static {
    // console.log: "MtcError [MTC_ERR_INVALID_ARGUMENT]: .a[0]: ..." and the stack, then the cause, if any.
    defineInspect<MtcError>(this.prototype, "MtcError", (e, nested) => {
      const stack = typeof e.stack === "string" ? e.stack : "";
      const at = stack.indexOf("\n    at ");
      const cause = e.cause === undefined ? "" : `\n  [cause]: ${nested(e.cause).split("\n").join("\n  ")}`;
      return `MtcError [${e.code}]: ${e.message}${at >= 0 ? stack.slice(at) : ""}${cause}`;
    }, false);
  }

  /** For JSON.stringify: its name, code, status, path and message (an Error's message is no own field). */
  toJSON(): { name: string; code: StatusName; status: number; path: string | undefined; message: string } {
    return { name: this.name, code: this.code, status: this.status, path: this.path, message: this.message };
  }
}

/**
 * A Map's entries, read once through its iterator; an MtcError with `path`
 * for a value that passes as a Map but cannot be read as one (a Proxy of a
 * Map: the engine's Map methods refuse it with a bare TypeError).
 */
export function mapEntries(map: Map<unknown, unknown>, path: string): [unknown, unknown][] {
  try {
    return Array.from(map);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    throw invalidArgument(`this Map cannot be read as one (a Proxy of a Map?): ${e.message}`, path);
  }
}

/**
 * Shorthand for an MTC_ERR_INVALID_STATE error: the code of every use of
 * something disposed or released (a DeviceTensor, pinned memory, an arena,
 * a stream, a handle), whichever call finds it.
 */
export function invalidState(message: string, path?: string): MtcError {
  return new MtcError(Status.MTC_ERR_INVALID_STATE, message, { path });
}

/** Shorthand for an MTC_ERR_INVALID_ARGUMENT error. */
export function invalidArgument(message: string, path?: string): MtcError {
  return new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, message, { path });
}

/**
 * Throws MtcError (MTC_ERR_INVALID_ARGUMENT) unless `options` is undefined
 * or an object whose own enumerable keys are all `known` (as startCopy
 * checks its options): "warmUp: options must be an object, got null",
 * 'warmUp: unknown option "pinned" (known: ...)'. `where` ends with ": " or
 * is empty; `name` and `item` name the object and its keys in messages.
 */
export function checkOptionNames(
  options: unknown,
  known: readonly string[],
  where = "",
  name = "options",
  item = "option",
): void {
  if (options === undefined) return;
  if (options === null || typeof options !== "object") {
    throw invalidArgument(`${where}${name} must be an object, got ${options === null ? "null" : typeof options}`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw invalidArgument(`${where}unknown ${item} ${JSON.stringify(key)} (known: ${known.join(", ")})`);
  }
}

/** One value for a message, read without calling any of it (no toString, no getter). */
export function showValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
    case "bigint":
      return `${value}n`;
    case "function":
      return "a function";
    case "object":
      return value === null ? "null" : Array.isArray(value) ? "an array" : "an object";
    default:
      return String(value); // numbers (NaN, -1, 1.5), booleans, undefined, symbols
  }
}
