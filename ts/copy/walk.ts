/**
 * Walks a nested batch once, without recursion: builds the output's
 * containers (new arrays, plain objects and Maps with the same keys), puts
 * pass-through values and reused leaves in place, and lists the leaves that
 * must be copied with where their copies go.
 *
 * @module
 */

import { DEVICE_CPU } from "../gpu/device.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";
import { type DType, typedArrayKind, type TypedArray } from "../tensor/dtype.ts";
import { invalidArgument } from "../base/errors.ts";
import { Tensor } from "../tensor/tensor.ts";

/** A leaf that is copied: a bare typed array, a host Tensor or a DeviceTensor. */
export type Leaf = TypedArray | Tensor | DeviceTensor;

const ARRAY = 0;
const OBJECT = 1;
const MAP = 2;
type Kind = typeof ARRAY | typeof OBJECT | typeof MAP;

/**
 * Where a container sits: its parent container and its key there (the root
 * container has parent null), and what kind of container it is.
 */
export interface PathNode {
  readonly parent: PathNode | null;
  readonly key: unknown;
  readonly kind: Kind;
}

/** A container being walked; it is also the PathNode of its leaves. */
interface Frame extends PathNode {
  readonly parent: Frame | null;
  readonly input: object;
  readonly output: object;
  /** Object: its keys. Map: its entries. Array: null (indices). */
  readonly keys: string[] | [unknown, unknown][] | null;
  readonly length: number;
  next: number;
  /** Index in the stack, for cycle checks. */
  readonly depth: number;
}

/** The outcome of a walk. */
export interface Traversal {
  /** Holds the output root at index 0 (the output is built in place). */
  readonly root: unknown[];
  /** Leaves to copy, in order: leaf i is the C plan's leaf i. */
  readonly leaves: Leaf[];
  /** The input container of leaf i, whose output container receives its copy (null for a root leaf). */
  readonly nodes: (PathNode | null)[];
  /** Key of leaf i in its container. */
  readonly keys: unknown[];
  /** Tensor leaves placed as they are, already on the target (not listed). */
  reused: number;
  // Set by writeLeaves, which reads each leaf once: what the copy reads and
  // what its results say (one entry per listed leaf).
  /** The dtype of leaf i. */
  dtypes: DType[];
  /** The frozen shape of leaf i; null for a bare typed array ([bytes / element size]). */
  shapes: (readonly number[] | null)[];
  /** The bytes copied of leaf i. */
  bytes: number[];
  /** The host view the copy reads for leaf i (a Tensor's data as read, or a snapshot); unset for DeviceTensors. */
  views: (TypedArray | undefined)[];
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function segment(kind: Kind, key: unknown): string {
  if (kind === ARRAY) return `[${key as number}]`;
  if (kind === OBJECT) {
    const k = key as string;
    return IDENTIFIER.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
  }
  switch (typeof key) {
    case "number":
      return `[${Number.isFinite(key) ? JSON.stringify(key) : String(key)}]`; // NaN, Infinity have no JSON
    case "string":
    case "boolean":
      return `[${JSON.stringify(key)}]`;
    case "bigint":
      return `[${key}n]`;
    case "symbol":
      return `[${key.toString()}]`;
    default:
      return key === null ? "[null]" : `[${String(key)}]`;
  }
}

/**
 * The path of the value at `key` in the container at `node` (null and an
 * undefined key: the root itself). See MtcError for the format.
 */
export function formatPath(node: PathNode | null, key?: unknown): string {
  if (node === null) return "";
  const parts = [segment(node.kind, key)];
  for (let n = node; n.parent !== null; n = n.parent) parts.push(segment(n.parent.kind, n.key));
  return parts.reverse().join("");
}

/** The path of copied leaf i. */
export function leafPath(t: Traversal, i: number): string {
  return formatPath(t.nodes[i]!, t.keys[i]);
}

/** Puts `value` at leaf i's place in the output. */
export function place(t: Traversal, i: number, value: unknown): void {
  const node = t.nodes[i] as Frame | null;
  if (node === null) t.root[0] = value;
  else setValue(node.output, node.kind, t.keys[i], value);
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Containers nearer the root than this are checked for cycles by scanning the stack; deeper ones through a Map. */
const SCAN_DEPTH = 16;

/**
 * Walks `data` for a copy to `target` (-1 = host, N = cuda:N). Host leaves
 * bound for the host and DeviceTensors already on the target are placed as
 * they are; every other tensor leaf is listed. Throws MtcError with the
 * path for a cycle and for a DeviceTensor that was disposed.
 */
export function traverse(data: unknown, target: number): Traversal {
  const t: Traversal = { root: [undefined], leaves: [], nodes: [], keys: [], reused: 0, dtypes: [], shapes: [], bytes: [], views: [] };
  const stack: Frame[] = [];
  // Inputs of frames at depth >= SCAN_DEPTH (the rare deep nesting); shallower ones are scanned.
  const deep = new Map<object, Frame>();

  let parent: Frame | null = null;
  let key: unknown = 0;
  let value: unknown = data;
  for (;;) {
    // Visit `value` at (parent, key): place it, list it, or open a frame for it.
    const output = parent === null ? t.root : parent.output;
    const kind = parent === null ? ARRAY : parent.kind;
    if (typeof value !== "object" || value === null) {
      setValue(output, kind, key, value);
    } else if (value instanceof DeviceTensor) {
      if (value.disposed) {
        throw invalidArgument("this DeviceTensor was disposed and cannot be copied", formatPath(parent, key));
      }
      if (value.deviceIndex === target) {
        setValue(output, kind, key, value);
        t.reused++;
      } else addLeaf(t, value, output, parent, kind, key);
    } else if (value instanceof Tensor || typedArrayKind(value) !== undefined) {
      if (target === DEVICE_CPU) {
        setValue(output, kind, key, value);
        t.reused++;
      } else addLeaf(t, value as Leaf, output, parent, kind, key);
    } else {
      let childKind: Kind | -1;
      if (Array.isArray(value)) childKind = ARRAY;
      else if (value instanceof Map) childKind = MAP;
      else if (isPlainObject(value)) childKind = OBJECT;
      else childKind = -1;
      if (childKind === -1) {
        setValue(output, kind, key, value); // class instances, DataView, Set, ... pass through
      } else {
        checkCycle(stack, deep, value, parent, key);
        let out: object;
        let keys: Frame["keys"] = null;
        let length: number;
        if (childKind === ARRAY) {
          length = (value as unknown[]).length;
          out = new Array(length);
        } else if (childKind === MAP) {
          keys = Array.from(value as Map<unknown, unknown>);
          length = keys.length;
          out = new Map();
        } else {
          keys = Object.keys(value);
          length = keys.length;
          out = {};
        }
        setValue(output, kind, key, out);
        const frame: Frame = { parent, key, kind: childKind, input: value, output: out, keys, length, next: 0, depth: stack.length };
        if (frame.depth >= SCAN_DEPTH) deep.set(value, frame);
        stack.push(frame);
      }
    }
    // The next value: the next child of the innermost unfinished container.
    let frame: Frame | undefined;
    for (;;) {
      frame = stack[stack.length - 1];
      if (frame === undefined || frame.next < frame.length) break;
      stack.pop();
      if (frame.depth >= SCAN_DEPTH) deep.delete(frame.input);
    }
    if (frame === undefined) return t;
    const i = frame.next++;
    parent = frame;
    if (frame.kind === ARRAY) {
      key = i;
      value = (frame.input as unknown[])[i];
    } else if (frame.kind === OBJECT) {
      key = (frame.keys as string[])[i]!;
      value = (frame.input as Record<string, unknown>)[key as string];
    } else {
      const entry = (frame.keys as [unknown, unknown][])[i]!;
      key = entry[0];
      value = entry[1];
    }
  }
}

/** Throws when `value` is a container on the current path (it would contain itself). */
function checkCycle(stack: Frame[], deep: Map<object, Frame>, value: object, parent: Frame | null, key: unknown): void {
  let seen: Frame | undefined;
  const shallow = Math.min(stack.length, SCAN_DEPTH);
  for (let i = 0; i < shallow; i++) {
    if (stack[i]!.input === value) {
      seen = stack[i];
      break;
    }
  }
  seen ??= stack.length > SCAN_DEPTH ? deep.get(value) : undefined;
  if (seen === undefined) return;
  const first = formatPath(seen.parent, seen.key);
  throw invalidArgument(
    `cycle: this container contains itself (it is also at ${first === "" ? "(root)" : first})`,
    formatPath(parent, key),
  );
}

function addLeaf(t: Traversal, leaf: Leaf, output: object, parent: Frame | null, kind: Kind, key: unknown): void {
  setValue(output, kind, key, undefined); // keeps the key's place in the output's key order
  t.leaves.push(leaf);
  t.nodes.push(parent);
  t.keys.push(key);
}

function setValue(output: object, kind: Kind, key: unknown, value: unknown): void {
  if (kind === ARRAY) (output as unknown[])[key as number] = value;
  else if (kind === MAP) (output as Map<unknown, unknown>).set(key, value);
  else if (key === "__proto__") {
    // An own "__proto__" key (JSON.parse makes them) must stay a key, not become the prototype.
    Object.defineProperty(output, key, { value, writable: true, enumerable: true, configurable: true });
  } else (output as Record<string, unknown>)[key as string] = value;
}
