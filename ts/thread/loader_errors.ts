/**
 * The errors a loader's worker (ts/thread/loader_worker.ts) sends instead
 * of a batch when what it has is no batch it can send: a producer that
 * threw something other than an Error, a batch that postMessage cannot
 * clone (with the path of the value it refused), an error thrown outside
 * the producer's call. Cold paths: they run once, as the stream ends.
 *
 * @module
 */

import { MtcError, showValue, Status } from "../base/errors.ts";
import { ARRAY, formatPath, MAP, OBJECT, type PathNode } from "../copy/path.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";
import { Tensor } from "../tensor/tensor.ts";

/** What `value` is, for a message: `the string "disk full"`, `the number 42`, `undefined`, `an object {"why":1}`. */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "string":
    case "number":
    case "bigint":
    case "boolean":
      return `the ${typeof value} ${showValue(value)}`;
    case "symbol":
      return `a symbol (${value.toString()})`;
    case "undefined":
      return "undefined";
    case "function":
      return "a function";
  }
  if (value === null) return "null";
  // The caller's getters, toJSON and Proxy traps may run below: this is an error path, and what they throw is caught.
  let text: string | undefined;
  let kind = showValue(value);
  try {
    const proto = Object.getPrototypeOf(value);
    const name: unknown = proto?.constructor?.name;
    if (proto !== Object.prototype && proto !== Array.prototype && proto !== null && typeof name === "string") kind = `an object of class ${name}`;
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (typeof text !== "string" || (text === "{}" && kind !== "an object")) return kind;
  return `${kind} ${text.length > 80 ? `${text.slice(0, 80)}...` : text}`;
}

/**
 * What a producer threw (or rejected with) for batch `index`, as the Error
 * the consumer gets: an Error as it is; anything else an MtcError that says
 * what it was. A thrown string must not pass for a batch.
 */
export function producerError(thrown: unknown, index: number): Error {
  if (thrown instanceof Error) return thrown;
  return new MtcError(
    Status.MTC_ERR_INVALID_ARGUMENT,
    `startLoader: the producer threw ${describeValue(thrown)} for batch ${index}, not an Error`,
  );
}

/**
 * The error for an uncaught error or an unhandled rejection in worker
 * `worker` (code outside the producer's call: a timer, a promise nobody
 * awaited), which ends the worker before batch `index`. The error itself,
 * when it is one, comes as the cause.
 */
export function workerFailure(reason: unknown, uncaught: "an uncaught error" | "an unhandled rejection", worker: number, index: number): MtcError {
  const what = reason instanceof Error ? `${reason.name}: ${reason.message}` : describeValue(reason);
  return new MtcError(
    Status.MTC_ERR_INVALID_STATE,
    `startLoader: loader worker ${worker} failed before batch ${index}: ${uncaught} outside the producer's call: ${what}`,
    reason instanceof Error ? { cause: reason } : undefined,
  );
}

/**
 * An MtcError of ours in place of `error`, the error for batch `index`
 * that cannot be moved or posted (a getter in it throws, a field holds a
 * function); null when nothing of it can be read.
 */
export function unsentError(error: Error | null, index: number): MtcError {
  let what = "";
  try {
    const { name, message } = error ?? {};
    if (typeof name === "string" && typeof message === "string") what = `: ${name}: ${message}`;
  } catch {
    // a getter that throws: nothing more to say
  }
  return new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `startLoader: the error of batch ${index} cannot be sent to the loader's thread${what}`);
}

/** True when structured cloning (what postMessage does) accepts `value`. */
function clones(value: unknown): boolean {
  try {
    structuredClone(value);
    return true;
  } catch {
    return false;
  }
}

/** A value that cannot be sent, and where it is. */
interface Unsendable {
  readonly path: string;
  readonly value: unknown;
  /** It is a key of the Map at `path`. */
  readonly isKey?: boolean;
}

/**
 * Where in `value` (at `node`, `key`) lies something structured cloning
 * refuses: the deepest such value under the first refused one, or
 * undefined. Tensor leaves are skipped: moveResult sent them already.
 */
function findUnsendable(value: unknown, node: PathNode | null, key: unknown, seen: Set<object>): Unsendable | undefined {
  if (typeof value === "object" && value !== null) {
    if (ArrayBuffer.isView(value) || value instanceof Tensor || value instanceof DeviceTensor || seen.has(value)) return undefined;
    seen.add(value);
    const kind = Array.isArray(value) ? ARRAY : value instanceof Map ? MAP : OBJECT;
    const here: PathNode = { parent: node, key, kind };
    if (value instanceof Map) {
      for (const [k, v] of value) {
        if (!clones(k)) return { path: formatPath(node, key), value: k, isKey: true };
        const found = findUnsendable(v, here, k, seen);
        if (found !== undefined) return found;
      }
    } else {
      for (const k of Object.keys(value)) {
        const found = findUnsendable((value as Record<string, unknown>)[k], here, Array.isArray(value) ? Number(k) : k, seen);
        if (found !== undefined) return found;
      }
    }
  }
  // Its parts all clone (or it has none): it is the culprit if it does not.
  return clones(value) ? undefined : { path: formatPath(node, key), value };
}

/**
 * The error for batch `index` whose message postMessage refused (`cause`,
 * its DataCloneError): an MtcError naming the path of the first value it
 * cannot clone (a function, a symbol, a class instance holding one), found
 * by a search of the batch as the producer returned it.
 */
export function unsendableError(batch: unknown, index: number, cause: unknown): MtcError {
  const found = findUnsendable(batch, null, undefined, new Set());
  const what = found === undefined ? "a value" : `${describeValue(found.value)}${found.isKey === true ? " as a Map key" : ""}`;
  return new MtcError(
    Status.MTC_ERR_INVALID_ARGUMENT,
    `startLoader: batch ${index} holds ${what}, which postMessage cannot send to the loader's thread ` +
      "(a batch holds tensors, typed arrays, plain data, arrays, plain objects and Maps)",
    { path: found?.path, cause: cause instanceof Error ? `${cause.name}: ${cause.message.split("\n")[0]}` : undefined },
  );
}
