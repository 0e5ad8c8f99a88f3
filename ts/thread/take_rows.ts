/**
 * The checks of a moved result's leaf rows (take.ts), before anything is
 * taken: each row on its own (codes in range, shapes of integers, flags of
 * its kind, a pageable Tensor's layout and elements), then against what C
 * says the parcel holds (a block of the leaf's kind and device, the leaf's
 * bytes inside it, aligned for its dtype, every block named by a leaf).
 * What comes out is a plan of each leaf, from which take.ts makes it.
 *
 * @module
 */

import { MtcError } from "../base/errors.ts";
import { viewKind } from "../base/views.ts";
import { cudaDeviceCount } from "../gpu/info.ts";
import { type DType, DTYPE_SIZE, DTYPES, isNaturalDType, type TypedArray, valuesPerElement, viewStorage } from "../tensor/dtype.ts";
import { frozenShape, tooLarge } from "../tensor/shape.ts";
import { layoutProblem } from "../tensor/strides.ts";
import { Tensor, trustedTensor } from "../tensor/tensor.ts";
import { damaged, DATA, DEVICE, F, FIELDS, KEEPS_TENSOR, LEAF, leafPath, type MovedError, NATURAL, PACKED, PINNED, shown, type Template, TENSOR } from "./message.ts";

const REF_BLOCK = 1;

/** A message's fields, each read once, of the kinds they must be; arrays are copies. */
export interface Received {
  parcel: number;
  root: number;
  template: string;
  nums: Float64Array;
  dims: Float64Array;
  data: unknown[];
  extras: unknown[] | null;
  error: MovedError | undefined;
}

/** What C says one of the parcel's references is (mtc_parcel_entry). */
export interface Entry {
  /** The ref, as the 64-bit word C wrote. */
  ref: bigint;
  block: number;
  address: number;
  bytes: number;
  kind: number;
  device: number;
  pinned: boolean;
}

/** One leaf as checked: what take.ts makes it from. */
export interface LeafPlan {
  kind: number;
  /** Its block's index in the parcel, or -1. */
  block: number;
  /** Bytes from the block's first. */
  offset: number;
  /** A pinned view's array length. */
  length: number;
  device: number;
  /** Index in DTYPES. */
  dtype: number;
  shape: readonly number[];
  /** Elements (the product of the shape). */
  count: number;
  packed: boolean;
  keepsTensor: boolean;
  natural: boolean;
  /** A strided pinned Tensor's layout. */
  layout: { strides: readonly number[]; offset: number } | null;
  /** A pageable Tensor, made (and checked) by its constructor. */
  made?: Tensor;
}

const ALLOWED_FLAGS = [PACKED | KEEPS_TENSOR, NATURAL, 0]; // by kind: DEVICE, PINNED, TENSOR

const isIndex = (x: number) => Number.isSafeInteger(x) && x >= 0;

/**
 * Checks every row of `m` against `template` and, through `describe` (which
 * asks C, for as many entries as the rows name blocks), against the parcel.
 * Throws MtcError naming the leaf; takes nothing.
 */
export function checkRows(m: Received, template: Template, describe: (blocks: number) => Entry[]): { leaves: LeafPlan[]; entries: Entry[]; spans: number[] } {
  const bad = (what: string, leaf?: number) => damaged("takeResult", what, leaf === undefined ? undefined : leafPath(template, m.root, leaf));
  const leafCount = template.leaves + (m.root === LEAF ? 1 : 0);
  const dataCount = template.data + (m.root === DATA ? 1 : 0);
  if ((template.containers.length > 0) !== (m.root === 0)) throw bad(`its root ${m.root} does not match its template`);
  if (m.nums.length !== leafCount * FIELDS) throw bad(`its template holds ${leafCount} leaves but its nums has ${m.nums.length} numbers (${FIELDS} a leaf)`);
  if (m.data.length !== dataCount) throw bad(`its template holds ${dataCount} values but its data has ${m.data.length}`);
  if (m.extras !== null && m.extras.length !== leafCount) throw bad(`it has ${leafCount} leaves but ${m.extras.length} extras`);
  const { nums, dims } = m;
  const leaves = new Array<LeafPlan>(leafCount);
  let blocks = 0;
  let dim = 0;
  for (let leaf = 0, at = 0; leaf < leafCount; leaf++, at += FIELDS) {
    const kind = nums[at + F.kind]!, block = nums[at + F.block]!, offset = nums[at + F.offset]!, length = nums[at + F.length]!;
    const device = nums[at + F.device]!, code = nums[at + F.dtype]!, flags = nums[at + F.flags]!, ndim = nums[at + F.ndim]!;
    if (kind !== DEVICE && kind !== PINNED && kind !== TENSOR) throw bad(`its leaf kind is ${kind}`, leaf);
    if (!isIndex(code) || code >= DTYPES.length) throw bad(`its dtype code is ${code}`, leaf);
    if (!isIndex(ndim) || dim + ndim > dims.length) throw bad(`its shape has ${ndim} dimensions, past the ${dims.length} in dims`, leaf);
    if (!isIndex(flags) || (flags & ~ALLOWED_FLAGS[kind]!) !== 0) throw bad(`its flags are ${flags}`, leaf);
    if (!(block === -1 || (isIndex(block) && block < leafCount)) || !isIndex(offset) || !isIndex(length) || !isIndex(device)) {
      throw bad(`its block ${block}, offset ${offset}, length ${length} or device ${device} is no index`, leaf);
    }
    const dtype = DTYPES[code]!;
    const extents = Array.from(dims.subarray(dim, dim + ndim));
    dim += ndim;
    let count = 1;
    for (const n of extents) {
      if (!isIndex(n)) throw bad(`its shape [${extents.join(", ")}] is not of integers >= 0`, leaf);
      count *= n;
    }
    const large = tooLarge(extents, dtype, count, DTYPE_SIZE[dtype]);
    if (large !== null) throw bad(large, leaf);
    const extra: unknown = m.extras?.[leaf] ?? null;
    const plan: LeafPlan = {
      kind, block, offset, length, device, dtype: code, shape: frozenShape(extents), count,
      packed: (flags & PACKED) !== 0, keepsTensor: (flags & KEEPS_TENSOR) !== 0, natural: (flags & NATURAL) !== 0, layout: null,
    };
    const problem = kind === TENSOR ? pageable(plan, dtype, extra) : kind === PINNED ? pinnedRow(plan, dtype, extra) : deviceRow(plan, extra);
    if (problem !== null) throw bad(problem, leaf);
    if (block >= 0) blocks = Math.max(blocks, block + 1);
    leaves[leaf] = plan;
  }
  if (dim !== dims.length) throw bad(`its dims has ${dims.length} extents but its shapes use ${dim}`);
  const entries = describe(blocks);
  const named = new Uint8Array(blocks);
  const spans = new Array<number>(blocks).fill(1); // a pinned buffer of at least one byte
  for (let leaf = 0; leaf < leafCount; leaf++) {
    const plan = leaves[leaf]!;
    if (plan.block < 0) continue;
    const e = entries[plan.block]!;
    const problem = againstBlock(plan, e);
    if (problem !== null) throw bad(`${problem} (block ${plan.block}: ${e.pinned ? "pinned" : `cuda:${e.device}`}, ${e.bytes} bytes)`, leaf);
    named[plan.block] = 1;
    if (plan.kind === PINNED) spans[plan.block] = Math.max(spans[plan.block]!, plan.offset + plan.length * storageBytes(DTYPES[plan.dtype]!));
  }
  const unnamed = named.indexOf(0);
  if (unnamed >= 0) throw bad(`no leaf names block ${unnamed} of its parcel`);
  return { leaves, entries, spans };
}

/** Bytes of one value of the typed array that stores `dtype` (a complex element is two). */
function storageBytes(dtype: DType): number {
  return DTYPE_SIZE[dtype] / valuesPerElement(dtype);
}

function deviceRow(plan: LeafPlan, extra: unknown): string | null {
  if (extra !== null || plan.length !== 0) return "a DeviceTensor's row has a length or a layout";
  if (plan.block >= 0) return null;
  // No block: an empty tensor, at address 0.
  if (plan.offset !== 0 || plan.count !== 0) return `a DeviceTensor of ${plan.count} elements has no block`;
  const devices = cudaDeviceCount();
  return plan.device < devices ? null : `an empty DeviceTensor on cuda:${plan.device}, of ${devices} devices`;
}

function pinnedRow(plan: LeafPlan, dtype: DType, extra: unknown): string | null {
  const values = valuesPerElement(dtype);
  if (plan.block < 0 || plan.device !== 0) return "a pinned leaf's row has no block, or a device";
  if (plan.offset % storageBytes(dtype) !== 0 || plan.length % values !== 0) return `a pinned ${dtype} view at byte ${plan.offset} of ${plan.length} values is misaligned`;
  if (plan.natural) {
    if (extra !== null || plan.shape.length !== 1 || plan.shape[0] !== plan.length || !isNaturalDType(dtype)) return `a bare ${dtype} array's shape [${plan.shape.join(", ")}] is not [${plan.length}]`;
    return null;
  }
  if (extra === null) return plan.count * values === plan.length ? null : `shape [${plan.shape.join(", ")}] of ${dtype} is not the ${plan.length} values of its view`;
  const layout = readLayout(extra);
  if (typeof layout === "string") return layout;
  if (layout.data !== undefined || layout.strides === undefined) return "a pinned leaf's extra has elements, or no strides";
  const problem = layoutProblem(plan.shape, plan.count, layout.strides, layout.offset, plan.length / values);
  if (problem !== null) return problem;
  plan.layout = { strides: layout.strides, offset: layout.offset };
  return null;
}

function pageable(plan: LeafPlan, dtype: DType, extra: unknown): string | null {
  if (plan.block !== -1 || plan.offset !== 0 || plan.length !== 0 || plan.device !== 0) return "a pageable Tensor's row has a block, offset, length or device";
  const layout = readLayout(extra);
  if (typeof layout === "string") return layout;
  if (viewKind(layout.data) === undefined) return `a pageable Tensor's elements are ${shown(layout.data)}, not a typed array`;
  try {
    const given = layout.strides === undefined ? undefined : { strides: layout.strides, offset: layout.offset };
    plan.made = new Tensor(layout.data as TypedArray, plan.shape, dtype, given);
  } catch (e) {
    if (e instanceof MtcError) return e.message;
    throw e;
  }
  return null;
}

/** An extra's fields, each read once; the strides copied. A string says what is wrong. */
function readLayout(extra: unknown): { data: unknown; strides: number[] | undefined; offset: number } | string {
  if (typeof extra !== "object" || extra === null) return `its extra is ${shown(extra)}, not an object`;
  const { data, strides, offset } = extra as Record<string, unknown>;
  if (strides !== undefined && !Array.isArray(strides)) return `its strides are ${shown(strides)}, not an array`;
  if (!isIndex(offset as number) || (strides === undefined && offset !== 0)) return `its offset is ${shown(offset)}`;
  return { data, strides: strides === undefined ? undefined : Array.prototype.slice.call(strides), offset: offset as number };
}

/** Why `plan` cannot lie in the block C described, or null. */
function againstBlock(plan: LeafPlan, e: Entry): string | null {
  const dtype = DTYPES[plan.dtype]!;
  if (e.kind !== REF_BLOCK) return "its block is no block";
  if (plan.kind === PINNED) {
    if (!e.pinned) return "a pinned leaf names a block of device memory";
    const end = plan.offset + plan.length * storageBytes(dtype);
    return end <= e.bytes ? null : `bytes ${plan.offset}..${end} lie past its block`;
  }
  if (e.pinned || e.device < 0) return "a DeviceTensor names a block of host memory";
  if (plan.device !== e.device) return `a DeviceTensor on cuda:${plan.device} names a block on cuda:${e.device}`;
  if (plan.offset % storageBytes(dtype) !== 0) return `a ${dtype} DeviceTensor at byte ${plan.offset} of its block is misaligned`;
  const end = plan.offset + plan.count * DTYPE_SIZE[dtype];
  return end <= e.bytes ? null : `bytes ${plan.offset}..${end} lie past its block`;
}

/** A pinned leaf of the receiver's buffer, as the checked plan says. */
export function pinnedLeaf(buffer: ArrayBuffer, plan: LeafPlan, dtype: DType): TypedArray | Tensor {
  const data = viewStorage(dtype, buffer, plan.offset, plan.length / valuesPerElement(dtype))!; // aligned: checked
  if (plan.natural) return data;
  if (plan.layout !== null) return new Tensor(data, plan.shape, dtype, plan.layout);
  return trustedTensor(data, plan.shape, dtype);
}
