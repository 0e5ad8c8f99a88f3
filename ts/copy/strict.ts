/**
 * The option `strict`: values that look like tensors but would not be
 * copied as tensors are refused, with an MtcError naming their path,
 * instead of passing through as they are while the result types say
 * DeviceTensor (types cannot tell a class instance from a plain object):
 *
 * - an object that passes through (a class instance, a Set, ...) but holds a
 *   typed array, a Tensor or a DeviceTensor, searched a few levels deep;
 * - a plain object with a Tensor's fields (`data`, `shape`, `dtype`): what
 *   `structuredClone` and `postMessage` make of a Tensor (they copy its
 *   fields and drop its class);
 * - a non-empty array of numbers: a tensor written as a JavaScript array.
 *
 * The checks read the mirror the walk built (what it read, once), except
 * inside pass-through objects, which the walk does not read otherwise.
 *
 * @module
 */

import { foreignCopy } from "../base/copy_identity.ts";
import { invalidArgument } from "../base/errors.ts";
import { viewByteLength } from "../base/views.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";
import { isDType } from "../tensor/dtype.ts";
import { Tensor } from "../tensor/tensor.ts";
import { ARRAY, formatPath, MAP, OBJECT } from "./path.ts";

/** How deep into a pass-through object the search goes, and how many values it reads at most. */
const SEARCH_DEPTH = 4;
const SEARCH_VALUES = 10_000;

const REBUILD = "make it a Tensor again (new Tensor(x.data, x.shape, x.dtype), with { strides, offset } for a strided one) " +
  "or leave the option strict off";

/** What `value` is, for a message, read without running its code: "a Set", "a Sample instance". */
function kindOf(value: object): string {
  const proto: unknown = Object.getPrototypeOf(value);
  const ctor = proto === null ? undefined : Object.getOwnPropertyDescriptor(proto, "constructor")?.value;
  const name = typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "" ? ctor.name : "object";
  return /^(Set|WeakSet|WeakMap|WeakRef|Date|RegExp|Promise|DataView|ArrayBuffer|SharedArrayBuffer)$/.test(name) || /Error$/.test(name)
    ? `a ${name}`
    : `a ${name} instance`;
}

/** "a Float32Array", "a Tensor", "a DeviceTensor", or undefined for anything that is no tensor. */
function tensorKind(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (value instanceof Tensor) return "a Tensor";
  if (value instanceof DeviceTensor) return "a DeviceTensor";
  if (ArrayBuffer.isView(value) && viewByteLength(value) >= 0) return `a ${Object.prototype.toString.call(value).slice(8, -1)}`;
  return foreignCopy(value); // another copy's Tensor or DeviceTensor
}

/** The path segment of `key` in a container of `kind`: "[2]", ".name", '["a key"]'. */
function segment(kind: typeof ARRAY | typeof OBJECT | typeof MAP, key: unknown): string {
  return formatPath({ parent: null, key: undefined, kind }, key);
}

/**
 * Throws when `value`, an object the walk passes through as it is, holds a
 * tensor: it would stay where it is. `path` is its leaf path.
 */
export function checkPassThrough(value: object, path: string): void {
  const queue: [object, string, number][] = [[value, "", 0]];
  const seen = new Set<object>([value]);
  let read = 0;
  for (let at = 0; at < queue.length && read < SEARCH_VALUES; at++) {
    const [item, itemPath, depth] = queue[at]!;
    const children: [unknown, string][] = [];
    if (item instanceof Set) {
      let i = 0;
      for (const v of item) children.push([v, itemPath + segment(ARRAY, i++)]); // a Set's values, numbered
    } else if (item instanceof Map) {
      for (const [k, v] of item) children.push([v, itemPath + segment(MAP, k)]);
    } else if (Array.isArray(item)) {
      item.forEach((v, i) => children.push([v, itemPath + segment(ARRAY, i)]));
    } else if (!(item instanceof Promise) && !ArrayBuffer.isView(item)) {
      for (const k of Object.keys(item)) children.push([(item as Record<string, unknown>)[k], itemPath + segment(OBJECT, k)]);
    }
    for (const [v, childPath] of children) {
      read++;
      const found = tensorKind(v);
      if (found !== undefined) {
        throw invalidArgument(
          `${kindOf(value)} passes through a copy as it is (only arrays, plain objects and Maps are walked), ` +
            `but it holds ${found} at ${childPath}, which would not be copied while the result's type says it was; ` +
            "put the tensors in a plain object or array, or leave the option strict off",
          path,
        );
      }
      if (typeof v === "object" && v !== null && depth + 1 < SEARCH_DEPTH && !seen.has(v)) {
        seen.add(v);
        queue.push([v, childPath, depth + 1]);
      }
    }
  }
}

/**
 * Throws for a plain object of the output (`output`, with the input's
 * `keys`) that has a Tensor's fields but is no Tensor. `path` is its path.
 */
export function checkTensorLookAlike(output: Record<string, unknown>, keys: readonly string[], path: string): void {
  if (!keys.includes("data") || !keys.includes("shape") || !keys.includes("dtype")) return;
  if (!isDType(output.dtype) || !Array.isArray(output.shape)) return;
  throw lookAlike(path);
}

function lookAlike(path: string): Error {
  return invalidArgument(
    "this plain object has a Tensor's fields (data, shape, dtype) but is no Tensor: structuredClone and postMessage " +
      "copy a Tensor's fields and drop its class, and the copy would copy its data as a 1-D tensor and pass shape " +
      `and dtype through; ${REBUILD}`,
    path,
  );
}

/**
 * Throws for a non-empty array of the output whose every element is a
 * number. `parentKeys` are the keys of the plain object holding it at
 * `key` (null for any other container): the `shape` of a look-alike Tensor
 * is reported as that, at `parentPath`.
 */
export function checkNumberArray(output: readonly unknown[], path: string, key: unknown, parentKeys: readonly string[] | null, parentPath: string): void {
  if (output.length === 0) return;
  for (const v of output) if (typeof v !== "number") return;
  if (key === "shape" && parentKeys !== null && parentKeys.includes("data") && parentKeys.includes("dtype")) throw lookAlike(parentPath);
  throw invalidArgument(
    `an array of ${output.length} number${output.length === 1 ? "" : "s"} is no tensor: it is rebuilt as an array and its numbers ` +
      "pass through uncopied; use a typed array for a tensor (new Float32Array(values)), or leave the option strict off",
    path,
  );
}
