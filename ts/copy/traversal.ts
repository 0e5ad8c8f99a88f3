/**
 * What one copy knows about its batch, filled by the stages in turn: the
 * walk (walk.ts) lists the leaves and mirrors the containers, describe
 * (describe.ts) fixes what each leaf is, results (results.ts) places what
 * each leaf became. Nothing here reads the inputs.
 *
 * @module
 */

import type { BlockHolder } from "../gpu/block.ts";
import type { DeviceTensor } from "../tensor/device_tensor.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { releaseBlockRef } from "../ffi/owner.ts";
import { retainPinnedBlock } from "../tensor/host_output.ts";
import { ARRAY, formatPath, type Kind, MAP, OBJECT, type PathNode } from "./path.ts";

/** A container of the batch being walked; it is also the PathNode of its leaves. */
export interface Frame extends PathNode {
  readonly parent: Frame | null;
  readonly input: object;
  /** Its mirror in the output: a new array, plain object or Map. */
  readonly output: object;
  /** Object: its keys. Map: its entries. Array: null (indices). */
  readonly keys: string[] | [unknown, unknown][] | null;
  readonly length: number;
  /** The next child to visit. */
  next: number;
  /** Index in the walk's stack, for cycle checks. */
  readonly depth: number;
}

/** A strided host leaf: its index and its dense-image layout in bytes (dimensions of extent 1 left out). */
export interface StridedLeaf {
  readonly index: number;
  readonly shape: readonly number[];
  readonly byteStrides: readonly number[];
}

/** The descriptor buffer the walk writes into: one mtc_leaf per listed leaf. */
export interface Descriptors {
  words: Uint32Array;
}

/**
 * One copy's batch, as the stages see it; leaf i is the C plan's leaf i.
 * For a device target, each leaf's result (a DeviceTensor) is made and
 * placed by the walk itself and settled when the copy is over; for "cpu",
 * the results view pinned memory that exists only then, so the walk keeps
 * where each goes and what it is.
 */
export class Traversal {
  /** Holds the output root at index 0 (the output is built in place). */
  readonly root: unknown[] = [undefined];
  /** Leaves listed for the copy. */
  count: number = 0;
  /** The leaves listed, held (with what they hold) until the copy no longer reads them. */
  readonly leaves: object[] = [];
  /** The host view the copy reads for leaf i (a Tensor's data as read, or a snapshot); undefined for DeviceTensors. */
  readonly views: (TypedArray | undefined)[] = [];
  /** Device targets: leaf i's result, address 0 until the copy is over. Null for "cpu". */
  readonly outputs: DeviceTensor[] | null;
  // "cpu" only: where leaf i's result goes and what it is, as describe read it.
  /** The container of leaf i (null for a root leaf). */
  readonly nodes: (Frame | null)[] = [];
  /** Key of leaf i in its container. */
  readonly keys: unknown[] = [];
  /** The dtype of leaf i. */
  readonly dtypes: DType[] = [];
  /** The frozen shape of leaf i. */
  readonly shapes: (readonly number[])[] = [];
  /** The bytes copied of leaf i. */
  readonly bytes: number[] = [];
  /** CUDA devices of the DeviceTensor sources (distinct, in order of appearance). */
  readonly sourceDevices: number[] = [];
  /** Block shares of DeviceTensor sources: their blocks live until the copy has read them. */
  shares: BlockHolder[] = [];
  /** C references to the pinned blocks under host outputs the copy reads or writes (null until the first). */
  pinnedBlocks: number[] | null = null;
  /** Strided leaves: the index of each, then its mtc_leaf_layout (null until the first). */
  layouts: StridedLeaf[] | null = null;
  /** Tensor leaves placed as they are, already on the target (not listed). */
  reused: number = 0;
  /** The DeviceTensors among them, as (tensor, container, key) triples: checked once the batch was read (null until the first). */
  placed: unknown[] | null = null;
  /** "cpu" only: results are JavaScript-owned copies, not views of pinned memory (usePinnedStaging: false). */
  pageableResults: boolean = false;
  /** copyInto only: the container of leaf i (its key in keys). The output is root[0], the destination, as it is. Null for startCopy. */
  intoNodes: (PathNode | null)[] | null = null;
  /** The option strict: look-alike tensors are refused (strict.ts). */
  strict: boolean = false;
  /** The option copyHostLeaves: "cpu" gets fresh copies of host leaves, not the leaves themselves (host_clone.ts). */
  copyHostLeaves: boolean = false;
  /** A prepared copy (prepared.ts): builds the output from the results words (one mtc_leaf_result per leaf), in place of settling outputs. */
  build: ((words: Uint32Array) => unknown) | null = null;
  /** A prepared copy: the path of each leaf, known from its template (for errors). */
  paths: readonly string[] | null = null;

  constructor(
    /** -1 for the host, N for cuda:N. */
    readonly target: number,
    /** Where describe writes the descriptors (module buffers lent for the walk). */
    public descriptors: Descriptors,
  ) {
    this.outputs = target === DEVICE_CPU ? null : [];
  }

  /** Drops the block shares of DeviceTensor sources and pinned outputs (the copy no longer uses them, or never will). */
  dropShares(): void {
    for (const holder of this.shares) holder.drop();
    this.shares = [];
    const pinned = this.pinnedBlocks;
    if (pinned !== null) {
      this.pinnedBlocks = null;
      for (const ref of pinned) releaseBlockRef(ref);
    }
  }

  /** The buffers holdPinned found pinned (each held once): the leaves of an arena share one. */
  #pinnedBuffers: Set<ArrayBufferLike> | null = null;

  /**
   * Holds the pinned block under `buffer` (a host leaf's), if it is pinned
   * memory of the library's (a pinned output, tensor or arena), until
   * dropShares; true when it is.
   */
  holdPinned(buffer: ArrayBufferLike): boolean {
    if (this.#pinnedBuffers?.has(buffer)) return true;
    const block = retainPinnedBlock(buffer);
    if (block === 0) return false;
    (this.pinnedBlocks ??= []).push(block);
    (this.#pinnedBuffers ??= new Set()).add(buffer);
    return true;
  }
}

/**
 * The path of copied leaf i: kept for "cpu"; for a device target, found by
 * looking for its result in the output (only errors need it).
 */
export function leafPath(t: Traversal, i: number): string {
  if (t.paths !== null) return t.paths[i] ?? "";
  if (t.intoNodes !== null) return formatPath(t.intoNodes[i]!, t.keys[i]);
  if (t.outputs === null) return formatPath(t.nodes[i]!, t.keys[i]);
  return pathOf(t.root[0], t.outputs[i]) ?? "";
}

/** The path of `value` in the output `root` (our own arrays, plain objects and Maps), without recursion. */
function pathOf(root: unknown, value: unknown): string | undefined {
  if (root === value) return "";
  const stack: [unknown, PathNode | null, unknown][] = [[root, null, 0]];
  while (stack.length > 0) {
    const [item, parent, key] = stack.pop()!;
    if (item === value) return formatPath(parent, key);
    if (typeof item !== "object" || item === null) continue;
    if (Array.isArray(item)) {
      const node: PathNode = { parent, key, kind: ARRAY };
      item.forEach((v, k) => stack.push([v, node, k]));
    } else if (item instanceof Map) {
      const node: PathNode = { parent, key, kind: MAP };
      for (const [k, v] of item) stack.push([v, node, k]);
    } else if (Object.getPrototypeOf(item) === Object.prototype) {
      const node: PathNode = { parent, key, kind: OBJECT };
      for (const k of Object.keys(item)) stack.push([(item as Record<string, unknown>)[k], node, k]);
    }
  }
  return undefined;
}

/** Puts `value` at `key` of an output container of kind `kind`. */
export function setValue(output: object, kind: Kind, key: unknown, value: unknown): void {
  if (kind === ARRAY) (output as unknown[])[key as number] = value;
  else if (kind === MAP) (output as Map<unknown, unknown>).set(key, value);
  else if (reachesPrototype(key as string)) defineKey(output, key as string, value);
  else (output as Record<string, unknown>)[key as string] = value;
}

/**
 * True when assigning `key` on a new plain object would reach
 * Object.prototype instead of making an own key: "__proto__" (it would set
 * the prototype), a key the prototype holds read-only (a frozen
 * Object.prototype's "constructor") or as an accessor (a setter someone
 * added, which would take the value). Such keys are defined (defineKey).
 */
export function reachesPrototype(key: string): boolean {
  return key in Object.prototype;
}

/** Makes `key` an own, writable, enumerable key of `object` holding `value`, whatever its prototype has. */
export function defineKey(object: object, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
}

/** Puts `value` at leaf i's place in the output ("cpu" targets). */
export function place(t: Traversal, i: number, value: unknown): void {
  const node = t.nodes[i]!;
  if (node === null) t.root[0] = value;
  else setValue(node.output, node.kind, t.keys[i], value);
}
