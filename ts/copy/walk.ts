/**
 * Stage 1 of a copy, the walk: one pass over a nested batch, without
 * recursion, that mirrors its containers (new arrays, plain objects and Maps
 * with the same keys in the same order), puts pass-through values and
 * reused leaves in place, and lists every leaf to copy, handing it to
 * describe (stage 2) in the same pass.
 *
 * Nothing is cached from one copy to the next: every call sees the batch as
 * it is now (keys added or removed, arrays resized, leaves replaced).
 *
 * @module
 */

import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, invalidState, mapEntries, MtcError, Status } from "../base/errors.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { DeviceTensor, isDeviceTensor, notADeviceTensor, tensorDevice, tensorDisposed } from "../tensor/device_tensor.ts";
import { naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { Tensor } from "../tensor/tensor.ts";
import { describeArray, describeDeviceTensor, describeTensor, type PointerOf, releaseDescriptors, takeDescriptors } from "./describe.ts";
import { cloneArray, cloneTensor } from "./host_clone.ts";
import { ARRAY, formatPath, MAP, OBJECT } from "./path.ts";
import { checkNumberArray, checkPassThrough, checkTensorLookAlike } from "./strict.ts";
import { defineKey, type Descriptors, type Frame, reachesPrototype, Traversal } from "./traversal.ts";

export { formatPath, type PathNode } from "./path.ts";
export { leafPath, place, Traversal } from "./traversal.ts";

/** Containers nearer the root than this are checked for cycles by scanning the stack; deeper ones through a Map. */
const SCAN_DEPTH = 16;

/** Where a walk keeps its stack (reused when walks do not nest). */
interface WalkState {
  readonly stack: Frame[];
  /** Inputs of frames at depth >= SCAN_DEPTH (the rare deep nesting); shallower ones are scanned. */
  readonly deep: Map<object, Frame>;
}

let spareState: WalkState | null = null;

/**
 * Walks `data` for a copy to `target` (-1 = host, N = cuda:N), writing the
 * descriptor of each listed leaf into `descriptors` (addresses through
 * `pointerOf`, or later in bulk where it is null). Host leaves bound for the
 * host and DeviceTensors already on the target are placed as they are. Throws
 * MtcError with the path for a cycle, a disposed DeviceTensor and a leaf
 * that cannot be copied as it is (see describe.ts); block shares taken
 * before a throw are dropped. `checks`: the options strict (strict.ts)
 * and copyHostLeaves (host_clone.ts).
 */
export function walk(
  data: unknown,
  target: number,
  descriptors: Descriptors,
  pointerOf: PointerOf | null,
  checks?: { readonly strict: boolean; readonly copyHostLeaves: boolean },
): Traversal {
  const t = new Traversal(target, descriptors);
  if (checks !== undefined) {
    t.strict = checks.strict;
    t.copyHostLeaves = checks.copyHostLeaves;
  }
  // A getter on a leaf may start another copy while this walk runs: it gets a stack of its own.
  const state = spareState ?? { stack: [], deep: new Map() };
  spareState = null;
  try {
    walkInto(t, data, state, pointerOf);
    if (t.placed !== null) checkPlaced(t.placed);
  } catch (e) {
    t.dropShares();
    state.stack.length = 0;
    state.deep.clear();
    throw e;
  } finally {
    spareState = state;
  }
  return t;
}

/**
 * The walk alone, for tests and the bench: a copy to `target`, with
 * descriptors written into a buffer of its own and no address read.
 */
export function traverse(data: unknown, target: number): Traversal {
  const d = takeDescriptors();
  try {
    return walk(data, target, d, null);
  } finally {
    releaseDescriptors(d);
  }
}

function walkInto(t: Traversal, data: unknown, state: WalkState, pointerOf: PointerOf | null): void {
  const stack = state.stack;
  t.root[0] = typeof data !== "object" || data === null ? data : visit(t, data, null, 0, state, pointerOf);
  for (;;) {
    const f = stack[stack.length - 1];
    if (f === undefined) return;
    const depth = stack.length;
    const n = f.length;
    let i = f.next;
    // One loop per container kind, each with one kind of load and store.
    if (f.kind === ARRAY) {
      const input = f.input as unknown[];
      const out = f.output as unknown[];
      for (; i < n; i++) {
        const v = input[i];
        out[i] = typeof v !== "object" || v === null ? v : visit(t, v, f, i, state, pointerOf);
        if (stack.length !== depth) break;
      }
    } else if (f.kind === OBJECT) {
      const input = f.input as Record<string, unknown>;
      const out = f.output as Record<string, unknown>;
      const keys = f.keys as string[];
      for (; i < n; i++) {
        const key = keys[i]!;
        const v = input[key];
        const placed = typeof v !== "object" || v === null ? v : visit(t, v, f, key, state, pointerOf);
        if (reachesPrototype(key)) defineKey(out, key, placed);
        else out[key] = placed;
        if (stack.length !== depth) break;
      }
    } else {
      const entries = f.keys as [unknown, unknown][];
      const out = f.output as Map<unknown, unknown>;
      for (; i < n; i++) {
        const entry = entries[i]!;
        const v = entry[1];
        out.set(entry[0], typeof v !== "object" || v === null ? v : visit(t, v, f, entry[0], state, pointerOf));
        if (stack.length !== depth) break;
      }
    }
    if (i < n) {
      f.next = i + 1; // a child container was opened: walk it first
      continue;
    }
    stack.pop();
    if (f.depth >= SCAN_DEPTH) state.deep.delete(f.input);
    if (t.strict) checkContainer(f);
  }
}

/** The option strict, for a container just walked: its mirror is no look-alike tensor (strict.ts). */
function checkContainer(f: Frame): void {
  const path = formatPath(f.parent, f.key);
  if (f.kind === OBJECT) checkTensorLookAlike(f.output as Record<string, unknown>, f.keys as string[], path);
  else if (f.kind === ARRAY) {
    const parent = f.parent;
    const parentKeys = parent !== null && parent.kind === OBJECT ? parent.keys as string[] : null;
    checkNumberArray(f.output as unknown[], path, f.key, parentKeys, parent === null ? "" : formatPath(parent.parent, parent.key));
  }
}

/**
 * What goes at (parent, key) for the object `v`: `v` itself (passed
 * through or reused), what describe returns for a leaf listed for the copy
 * (its result, or for "cpu" a placeholder), or the output container of a
 * container, whose frame is pushed on the stack.
 */
function visit(t: Traversal, v: object, parent: Frame | null, key: unknown, state: WalkState, pointerOf: PointerOf | null): unknown {
  if (v instanceof Tensor) {
    const strides = v.strides; // read once, here: describe is handed what was read
    if (t.target === DEVICE_CPU && strides === undefined) { // strided: copied dense
      return t.copyHostLeaves ? cloneTensor(v, parent, key) : reuse(t, v);
    }
    return describeTensor(t, v, strides, parent, key, pointerOf);
  }
  if (ArrayBuffer.isView(v)) {
    const dtype = naturalDType(v);
    if (dtype === undefined) return v; // a DataView passes through
    if (t.target === DEVICE_CPU) return t.copyHostLeaves ? cloneArray(v as TypedArray, dtype, parent, key) : reuse(t, v);
    return describeArray(t, v as TypedArray, dtype, parent, key, pointerOf);
  }
  if (v instanceof DeviceTensor) {
    if (!isDeviceTensor(v)) throw notADeviceTensor(formatPath(parent, key));
    if (tensorDisposed(v)) throw invalidState("this DeviceTensor was disposed and cannot be copied", formatPath(parent, key));
    if (tensorDevice(v) === t.target) {
      (t.placed ??= []).push(v, parent, key); // checked again once the batch was read
      return reuse(t, v);
    }
    return describeDeviceTensor(t, v, parent, key);
  }
  let frame: Frame;
  const stack = state.stack;
  if (Array.isArray(v)) {
    checkCycle(state, v, parent, key);
    const length = v.length;
    frame = { parent, key, kind: ARRAY, input: v, output: new Array(length), keys: null, length, next: 0, depth: stack.length };
  } else if (v instanceof Map) {
    checkCycle(state, v, parent, key);
    const entries = mapEntries(v as Map<unknown, unknown>, formatPath(parent, key));
    frame = { parent, key, kind: MAP, input: v, output: new Map(), keys: entries, length: entries.length, next: 0, depth: stack.length };
  } else if (isPlainObject(v)) {
    checkCycle(state, v, parent, key);
    const keys = Object.keys(v);
    frame = { parent, key, kind: OBJECT, input: v, output: {}, keys, length: keys.length, next: 0, depth: stack.length };
  } else {
    // Another copy's Tensor or DeviceTensor is none of ours: refused, not passed through as data.
    const other = otherCopyMark(v);
    if (other !== undefined) throw otherCopyError(other, formatPath(parent, key));
    if (t.strict) checkPassThrough(v, formatPath(parent, key));
    return v; // class instances, Sets, Dates, ... pass through
  }
  if (frame.depth >= SCAN_DEPTH) state.deep.set(v, frame);
  stack.push(frame);
  return frame.output;
}

/**
 * A getter read later in the batch may have disposed a DeviceTensor placed
 * as it is (already on the target): the result would hand it back.
 * `placed`: (tensor, parent, key) triples.
 */
function checkPlaced(placed: unknown[]): void {
  for (let k = 0; k < placed.length; k += 3) {
    if (tensorDisposed(placed[k] as DeviceTensor)) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, "this DeviceTensor was disposed while the batch was read (by a getter in it?); nothing was copied", {
        path: formatPath(placed[k + 1] as Frame | null, placed[k + 2]),
      });
    }
  }
}

function reuse(t: Traversal, leaf: object): object {
  t.reused++;
  return leaf;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Throws when `value` is a container on the current path (it would contain itself). */
function checkCycle(state: WalkState, value: object, parent: Frame | null, key: unknown): void {
  const stack = state.stack;
  let seen: Frame | undefined;
  const shallow = Math.min(stack.length, SCAN_DEPTH);
  for (let i = 0; i < shallow; i++) {
    if (stack[i]!.input === value) {
      seen = stack[i];
      break;
    }
  }
  seen ??= stack.length > SCAN_DEPTH ? state.deep.get(value) : undefined;
  if (seen === undefined) return;
  const first = formatPath(seen.parent, seen.key);
  throw invalidArgument(
    `cycle: this container contains itself (it is also at ${first === "" ? "(root)" : first})`,
    formatPath(parent, key),
  );
}
