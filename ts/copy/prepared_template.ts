/**
 * What a prepared copy knows of its sample batch (prepared.ts): the
 * template, a tree that says what lies at each place of the batch (a
 * container with its keys, a leaf with its dtype, shape and bytes, a
 * reused tensor, a pass-through value) and the path of each place, worked
 * out once. Each field of the sample is read once, and checked here on its
 * own (not trusted from another read), so that a batch that matches the
 * template is a batch the plain copy accepts, with the same descriptors.
 *
 * @module
 */

import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, invalidState, mapEntries } from "../base/errors.ts";
import { viewByteLength, viewKind } from "../base/views.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { DeviceTensor, isDeviceTensor, notADeviceTensor, tensorBytes, tensorDevice, tensorDisposed, tensorDType, tensorKeepsTensor, tensorShape } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, isDType, naturalDType, storageElementBytes, storageProblem } from "../tensor/dtype.ts";
import { checkedShape, elementCount, tooLarge, vectorShape } from "../tensor/shape.ts";
import { byteLayout, denseOffsetProblem, layoutProblem, layoutSpan } from "../tensor/strides.ts";
import { constructedShape, Tensor } from "../tensor/tensor.ts";
import { ARRAY, formatPath, type Kind, MAP, OBJECT, type PathNode } from "./path.ts";
import type { StridedLeaf } from "./traversal.ts";

/** What lies at one place of the batch. */
export const PASS = 0; // a pass-through value (number, string, null, class instance, DataView, ...)
export const CONTAINER = 1; // an array, plain object or Map
export const HOST = 2; // a dense host Tensor or a bare typed array, copied
export const STRIDED = 3; // a strided host Tensor, copied dense
export const DEVICE = 4; // a DeviceTensor of another device, copied
export const REUSED = 5; // a leaf already where the copy goes: placed as it is

/** Nesting deeper than this is not prepared (the check recurses). */
export const MAX_DEPTH = 256;

export interface PassNode {
  readonly what: typeof PASS;
  readonly path: string;
}

export interface ContainerNode {
  readonly what: typeof CONTAINER;
  readonly path: string;
  readonly kind: Kind;
  /** Object: its keys in order. Map: its keys in order. Array: empty. */
  readonly keys: readonly unknown[];
  readonly length: number;
  readonly children: readonly TemplateNode[];
  /** Object: a plain object with its keys in order, each undefined, that a batch's output copies (null for the rest). */
  readonly blank: Readonly<Record<string, undefined>> | null;
}

export interface LeafNode {
  readonly what: typeof HOST | typeof STRIDED | typeof DEVICE;
  readonly path: string;
  /** Its index among the copied leaves (the C plan's leaf index). */
  readonly index: number;
  /** A Tensor (HOST: else a bare typed array). */
  readonly tensor: boolean;
  readonly dtype: DType;
  /** Frozen: the results share it. */
  readonly shape: readonly number[];
  /** The bytes copied. */
  readonly bytes: number;
  /** DEVICE: the source's device; else DEVICE_CPU. */
  readonly device: number;
  /** DEVICE: a copy to the host gives a Tensor whatever the shape. */
  readonly keepsTensor: boolean;
  /** STRIDED: its layout, offset, storage length in bytes and element size, and the storage span it reads ([begin, end) in values). */
  readonly strides: readonly number[] | null;
  readonly offset: number;
  readonly dataBytes: number;
  readonly storageSize: number;
  /** HOST and STRIDED Tensors: the kind of array the sample's data is (one that stores its dtype). */
  readonly storageKind: string | undefined;
  readonly begin: number;
  readonly end: number;
  /** STRIDED with bytes > 0 and extents > 1: its mtc_leaf_layout. */
  readonly layout: StridedLeaf | null;
}

export interface ReusedNode {
  readonly what: typeof REUSED;
  readonly path: string;
  /** "tensor" (a dense host Tensor, to "cpu"), "array" (a typed array, to "cpu") or "device" (a DeviceTensor on the target). */
  readonly kind: "tensor" | "array" | "device";
}

export type TemplateNode = PassNode | ContainerNode | LeafNode | ReusedNode;

/** The template of a sample, its copied leaves in order, and what each copy of it tells C. */
export interface Template {
  readonly root: TemplateNode;
  readonly leaves: LeafNode[];
  /** For each copied leaf: the container it lies in (null: the root) and its key there. */
  readonly parents: (ContainerNode | null)[];
  readonly keys: unknown[];
  /** Each copied leaf's path, for errors. */
  readonly paths: string[];
  /** The strided leaves' layouts, for mtc_plan_set_leaf_layout (null: none). */
  layouts: StridedLeaf[] | null;
  /** The devices of the DeviceTensor leaves copied (distinct), for the streams a copy binds. */
  readonly sourceDevices: number[];
  /** Leaves placed as they are (already where the copy goes). */
  reused: number;
}

/** The error for a sample that cannot be prepared (the plain copy names these first: prepareCopy runs it on the sample before). */
function sampleError(path: string, why: string): Error {
  return invalidArgument(`prepareCopy: ${why}`, path);
}

/**
 * Builds the template of `sample` for a copy to `target`. `into`: a copy
 * into existing memory, which copies every leaf (none is reused).
 */
export function buildTemplate(sample: unknown, target: number, into = false): Template {
  const template: Template = { root: { what: PASS, path: "" }, leaves: [], parents: [], keys: [], paths: [], layouts: null, sourceDevices: [], reused: 0 };
  (template as { root: TemplateNode }).root = nodeOf(template, sample, into ? NO_TARGET : target, null, undefined, null, 0);
  for (const leaf of template.leaves) {
    template.paths.push(leaf.path);
    if (leaf.layout !== null) (template.layouts ??= []).push(leaf.layout);
    if (leaf.what === DEVICE && !template.sourceDevices.includes(leaf.device)) template.sourceDevices.push(leaf.device);
  }
  return template;
}

/** A target no leaf is on: nothing is reused (copyInto). */
const NO_TARGET = -2;

function nodeOf(
  template: Template,
  v: unknown,
  target: number,
  at: PathNode | null,
  key: unknown,
  parent: ContainerNode | null,
  depth: number,
): TemplateNode {
  const path = formatPath(at, key);
  if (typeof v !== "object" || v === null) return { what: PASS, path };
  if (v instanceof Tensor) {
    if (v.strides !== undefined) return stridedNode(template, v, path, parent, key);
    if (target === DEVICE_CPU) return reused(template, path, "tensor");
    return hostNode(template, v, path, parent, key);
  }
  if (ArrayBuffer.isView(v)) {
    const dtype = naturalDType(v);
    if (dtype === undefined) return { what: PASS, path }; // a DataView
    if (target === DEVICE_CPU) return reused(template, path, "array");
    const bytes = viewByteLength(v);
    if (bytes < 0) throw sampleError(path, "it claims to be a typed array but is none");
    return addLeaf(template, parent, key, { ...LEAF_DEFAULTS, what: HOST, path, index: 0, tensor: false, dtype, shape: vectorShape(bytes / DTYPE_SIZE[dtype]), bytes });
  }
  if (v instanceof DeviceTensor) {
    if (!isDeviceTensor(v)) throw notADeviceTensor(path);
    if (tensorDisposed(v)) throw invalidState("prepareCopy: this DeviceTensor was disposed and cannot be copied", path);
    const device = tensorDevice(v);
    if (device === target) return reused(template, path, "device");
    return addLeaf(template, parent, key, {
      ...LEAF_DEFAULTS, what: DEVICE, path, index: 0, tensor: true, dtype: tensorDType(v), shape: tensorShape(v),
      bytes: tensorBytes(v), device, keepsTensor: tensorKeepsTensor(v),
    });
  }
  let kind: Kind;
  let keys: unknown[];
  let values: unknown[];
  if (Array.isArray(v)) {
    kind = ARRAY;
    keys = [];
    values = Array.from({ length: v.length }, (_, i) => v[i]);
  } else if (v instanceof Map) {
    kind = MAP;
    const entries = mapEntries(v as Map<unknown, unknown>, path);
    keys = entries.map((e) => e[0]);
    values = entries.map((e) => e[1]);
  } else if (isPlainObject(v)) {
    kind = OBJECT;
    keys = Object.keys(v);
    values = keys.map((k) => (v as Record<string, unknown>)[k as string]);
  } else {
    const other = otherCopyMark(v);
    if (other !== undefined) throw otherCopyError(other, path);
    return { what: PASS, path };
  }
  if (depth >= MAX_DEPTH) throw sampleError(path, `the batch nests deeper than ${MAX_DEPTH} containers; copy it with startCopy`);
  const node: ContainerNode = { what: CONTAINER, path, kind, keys, length: values.length, children: [], blank: kind === OBJECT ? blankOf(keys as string[]) : null };
  const here: PathNode = { parent: at, key, kind };
  const children = node.children as TemplateNode[];
  for (let i = 0; i < values.length; i++) {
    children.push(nodeOf(template, values[i], target, here, kind === ARRAY ? i : keys[i], node, depth + 1));
  }
  return node;
}

/** A plain object with `keys`, in order, each undefined ("__proto__" an own key too). */
function blankOf(keys: readonly string[]): Record<string, undefined> {
  const blank: Record<string, undefined> = {};
  for (const key of keys) Object.defineProperty(blank, key, { value: undefined, writable: true, enumerable: true, configurable: true });
  return blank;
}

function reused(template: Template, path: string, kind: ReusedNode["kind"]): ReusedNode {
  template.reused++;
  return { what: REUSED, path, kind };
}

const LEAF_DEFAULTS = {
  device: DEVICE_CPU, keepsTensor: false, strides: null, offset: 0, dataBytes: 0, storageSize: 0, storageKind: undefined, begin: 0, end: 0, layout: null,
} as const;

function addLeaf(template: Template, parent: ContainerNode | null, key: unknown, leaf: LeafNode): LeafNode {
  (leaf as { index: number }).index = template.leaves.length;
  template.leaves.push(leaf);
  template.parents.push(parent);
  template.keys.push(key);
  return leaf;
}

/** A Tensor's shape as read: its frozen constructor shape, or a checked frozen copy. */
function shapeOf(leaf: Tensor, shape: unknown, path: string): readonly number[] {
  if (shape === constructedShape(leaf)) return shape as readonly number[];
  const checked = checkedShape(shape);
  if (checked === undefined) throw sampleError(path, "the Tensor's shape is not an array of integers >= 0");
  return checked;
}

function hostNode(template: Template, leaf: Tensor, path: string, parent: ContainerNode | null, key: unknown): LeafNode {
  const data = leaf.data;
  const dtype = leaf.dtype;
  const offset = leaf.offset;
  if (!isDType(dtype)) throw sampleError(path, "the Tensor's dtype is not one of the dtypes");
  const problem = denseOffsetProblem(offset) ?? storageProblem(data, dtype);
  if (problem !== undefined) throw sampleError(path, problem);
  const shape = shapeOf(leaf, leaf.shape, path);
  const bytes = elementCount(shape) * DTYPE_SIZE[dtype];
  if (viewByteLength(data) !== bytes) throw sampleError(path, "the Tensor's data does not hold what its shape and dtype say");
  return addLeaf(template, parent, key, { ...LEAF_DEFAULTS, what: HOST, path, index: 0, tensor: true, dtype, shape, bytes, storageKind: viewKind(data) });
}

function stridedNode(template: Template, leaf: Tensor, path: string, parent: ContainerNode | null, key: unknown): LeafNode {
  const data = leaf.data;
  const dtype = leaf.dtype;
  const strides = leaf.strides;
  const offset = leaf.offset;
  const shape = shapeOf(leaf, leaf.shape, path);
  const storageSize = storageElementBytes(data);
  if (!isDType(dtype) || storageSize === undefined || !Array.isArray(strides)) throw sampleError(path, "the Tensor's data, dtype or strides are not valid");
  const storage = storageProblem(data, dtype);
  if (storage !== undefined) throw sampleError(path, storage);
  const elementSize = DTYPE_SIZE[dtype];
  const elements = elementCount(shape);
  const dataBytes = viewByteLength(data);
  const frozenStrides = Object.freeze(strides.slice());
  const large = tooLarge(shape, dtype, elements, elementSize);
  if (large !== null) throw sampleError(path, large);
  const problem = layoutProblem(shape, elements, frozenStrides, offset, Math.floor(dataBytes / elementSize));
  if (problem !== null) throw sampleError(path, problem);
  const layout = byteLayout(shape, frozenStrides, elementSize);
  if (typeof layout === "string") throw sampleError(path, layout);
  const lanes = elementSize / storageSize;
  const [begin, end] = elements === 0 ? [offset, offset] : layoutSpan(shape, frozenStrides, offset);
  const bytes = elements * elementSize;
  const node = addLeaf(template, parent, key, {
    ...LEAF_DEFAULTS, what: STRIDED, path, index: 0, tensor: true, dtype, shape, bytes,
    strides: frozenStrides, offset, dataBytes, storageSize, storageKind: viewKind(data), begin: begin * lanes, end: end * lanes,
  });
  if (bytes > 0 && layout.shape.length > 0) {
    (node as { layout: StridedLeaf }).layout = { index: node.index, shape: layout.shape, byteStrides: layout.byteStrides };
  }
  return node;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** What a value is, in a message: "a Tensor", "a Float32Array", "an object", "5". */
export function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (typeof v !== "object") return typeof v === "string" ? "a string" : typeof v === "function" ? "a function" : `${typeof v} ${String(v)}`;
  if (v instanceof Tensor) return v.strides !== undefined ? "a strided Tensor" : "a Tensor";
  if (v instanceof DeviceTensor) return "a DeviceTensor";
  if (ArrayBuffer.isView(v)) return `a ${viewKind(v) ?? "DataView"}`;
  if (Array.isArray(v)) return "an array";
  if (v instanceof Map) return "a Map";
  return isPlainObject(v) ? "an object" : `a ${(v as object).constructor?.name ?? "class instance"}`;
}
