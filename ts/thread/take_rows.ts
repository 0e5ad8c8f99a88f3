/**
 * The checks of a moved result's leaf rows (take.ts), before anything is
 * taken: each row on its own (codes in range, shapes of integers, flags of
 * its kind, a pageable Tensor's layout and elements), then against what C
 * says the parcel holds (a block of the leaf's kind and device, the leaf's
 * bytes inside it, aligned for its dtype, every block named by a leaf).
 * The rows stay in the receiver's own copy of `nums`, from which take.ts
 * makes the leaves; this adds each leaf's shape and what is not in a row.
 *
 * @module
 */

import { MtcError } from "../base/errors.ts";
import { viewKind } from "../base/views.ts";
import { cudaDeviceCount } from "../gpu/info.ts";
import { type DType, DTYPE_SIZE, DTYPES, isNaturalDType, type TypedArray, valuesPerElement, viewStorage } from "../tensor/dtype.ts";
import { frozenShape, matrixShape, SCALAR_SHAPE, tooLarge, vectorShape } from "../tensor/shape.ts";
import { layoutProblem } from "../tensor/strides.ts";
import { Tensor, trustedTensor } from "../tensor/tensor.ts";
import { damaged, DATA, DEVICE, F, FIELDS, KEEPS_TENSOR, LEAF, leafPath, type MovedError, NATURAL, PACKED, PINNED, shown, type Template, TENSOR } from "./message.ts";

const REF_BLOCK = 1;

/** A message's fields, each read once, of the kinds they must be: nums and dims copied, data and extras copied by checkRows. */
export interface Received {
  parcel: number;
  root: number;
  template: string;
  nums: Float64Array;
  dims: Float64Array;
  data: unknown[];
  extras: unknown[] | null;
  error: MovedError | undefined;
  /** A prepared copy moved while it runs: its layout id, and the layout when the message brings it (unchecked). */
  layout?: unknown;
  shape?: unknown;
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

/** A strided pinned Tensor's layout, checked. */
export interface Layout {
  strides: readonly number[];
  offset: number;
}

/** The rows checked: the parcel's entries, and what take.ts needs beyond the rows. */
export interface Checked {
  entries: Entry[];
  /** Per block: the bytes a pinned buffer over it shows (to its leaves' end). */
  spans: number[];
  /** Per leaf: its shape, frozen. */
  shapes: (readonly number[])[];
  /** Per leaf: its bytes, by its shape and dtype (dense: a DeviceTensor's). */
  bytes: Float64Array;
  /** Per leaf: a pageable Tensor made (and checked by its constructor), a pinned Tensor's layout, or null. */
  extras: (Tensor | Layout | null)[];
}

const ALLOWED_FLAGS = [PACKED | KEEPS_TENSOR, NATURAL, 0]; // by kind: DEVICE, PINNED, TENSOR

/** An integer >= 0 that a double holds exactly (NaN fails the first test). */
const isIndex = (x: number) => x >= 0 && x <= Number.MAX_SAFE_INTEGER && Math.floor(x) === x;

/** Bytes of an element, by dtype code. */
const ELEMENT_BYTES = DTYPES.map((d) => DTYPE_SIZE[d]);

/** Bytes of one value of the typed array that stores each dtype (a complex element is two), by dtype code. */
const STORAGE_BYTES = DTYPES.map((d) => DTYPE_SIZE[d] / valuesPerElement(d));

/** True when `offset` (an index) is a multiple of `bytes` (a power of two): a mask where it fits 31 bits. */
const aligned = (offset: number, bytes: number) => (offset <= 0x7fffffff ? ((offset | 0) & (bytes - 1)) === 0 : offset % bytes === 0);

/** `length` elements of `array`, each read once, into an array of ours. */
function copied(array: unknown[], length: number): unknown[] {
  const out = new Array<unknown>(length);
  for (let i = 0; i < length; i++) out[i] = array[i];
  return out;
}

/**
 * Checks every row of `m` against `template` and, through `describe` (which
 * asks C, for as many entries as the rows name blocks), against the parcel.
 * Copies `m.data` and `m.extras` into arrays of ours. Throws MtcError
 * naming the leaf; takes nothing.
 */
export function checkRows(m: Received, template: Template, describe: (blocks: number) => Entry[]): Checked {
  const bad = (what: string, leaf?: number) => damaged("takeResult", what, leaf === undefined ? undefined : leafPath(template, m.root, leaf));
  const leafCount = template.leaves + (m.root === LEAF ? 1 : 0);
  const dataCount = template.data + (m.root === DATA ? 1 : 0);
  if ((template.containers.length > 0) !== (m.root === 0)) throw bad(`its root ${m.root} does not match its template`);
  if (m.nums.length !== leafCount * FIELDS) throw bad(`its template holds ${leafCount} leaves but its nums has ${m.nums.length} numbers (${FIELDS} a leaf)`);
  // Lengths read once, checked, then the elements copied: what user code does with the arrays from now on changes nothing.
  const dataLength = m.data.length;
  if (dataLength !== dataCount) throw bad(`its template holds ${dataCount} values but its data has ${dataLength}`);
  m.data = copied(m.data, dataCount);
  const extrasLength = m.extras === null ? leafCount : m.extras.length;
  if (extrasLength !== leafCount) throw bad(`it has ${leafCount} leaves but ${extrasLength} extras`);
  if (m.extras !== null) m.extras = copied(m.extras, leafCount);
  const { nums, dims, extras } = m;
  const shapes = new Array<readonly number[]>(leafCount);
  const bytes = new Float64Array(leafCount);
  const made = new Array<Tensor | Layout | null>(leafCount).fill(null);
  let blocks = 0;
  let dim = 0;
  // Small integers as int32 (`| 0`, then compared with the double read): a row
  // is doubles, and an index or a field that is a double costs JavaScriptCore a slow path.
  for (let leaf = 0, at = 0; leaf < leafCount; leaf++, at += FIELDS) {
    const kind = nums[at + F.kind]! | 0, block = nums[at + F.block]! | 0, code = nums[at + F.dtype]! | 0;
    const device = nums[at + F.device]! | 0, flags = nums[at + F.flags]! | 0, ndim = nums[at + F.ndim]! | 0;
    const offset = nums[at + F.offset]!, length = nums[at + F.length]!;
    if (kind !== nums[at + F.kind] || (kind !== DEVICE && kind !== PINNED && kind !== TENSOR)) throw bad(`its leaf kind is ${nums[at + F.kind]}`, leaf);
    if (code !== nums[at + F.dtype] || code < 0 || code >= DTYPES.length) throw bad(`its dtype code is ${nums[at + F.dtype]}`, leaf);
    if (ndim !== nums[at + F.ndim] || ndim < 0 || dim + ndim > dims.length) throw bad(`its shape has ${nums[at + F.ndim]} dimensions, past the ${dims.length} in dims`, leaf);
    if (flags !== nums[at + F.flags] || (flags & ~ALLOWED_FLAGS[kind]!) !== 0) throw bad(`its flags are ${nums[at + F.flags]}`, leaf);
    if (block !== nums[at + F.block] || block < -1 || block >= leafCount || device !== nums[at + F.device] || device < 0 || !isIndex(offset) || !isIndex(length)) {
      throw bad(`its block ${nums[at + F.block]}, offset ${offset}, length ${length} or device ${nums[at + F.device]} is no index`, leaf);
    }
    let count = 1;
    for (let i = dim; i < dim + ndim; i++) {
      const n = dims[i]!;
      if ((n >>> 0) !== n && !isIndex(n)) throw bad(`its shape [${Array.from(dims.subarray(dim, dim + ndim)).join(", ")}] is not of integers >= 0`, leaf);
      count *= n;
    }
    const shape = shapeAt(dims, dim, ndim);
    dim += ndim;
    shapes[leaf] = shape;
    bytes[leaf] = count * ELEMENT_BYTES[code]!;
    const dtype = DTYPES[code]!;
    if (bytes[leaf]! > Number.MAX_SAFE_INTEGER) throw bad(tooLarge(shape, dtype, count, DTYPE_SIZE[dtype])!, leaf);
    const extra: unknown = extras === null ? null : extras[leaf] ?? null;
    let problem: string | null;
    if (kind === DEVICE) {
      problem = extra !== null || length !== 0 ? "a DeviceTensor's row has a length or a layout" : block < 0 ? emptyDevice(offset, count, device) : null;
    } else if (kind === PINNED) {
      const checked = pinnedRow(block, offset, length, device, dtype, flags, shape, count, extra);
      problem = typeof checked === "string" ? checked : null;
      if (typeof checked === "object") made[leaf] = checked;
    } else {
      const checked = block !== -1 || offset !== 0 || length !== 0 || device !== 0
        ? "a pageable Tensor's row has a block, offset, length or device"
        : pageable(shape, dtype, extra);
      problem = typeof checked === "string" ? checked : null;
      if (typeof checked === "object") made[leaf] = checked;
    }
    if (problem !== null) throw bad(problem, leaf);
    if (block >= blocks) blocks = block + 1;
  }
  if (dim !== dims.length) throw bad(`its dims has ${dims.length} extents but its shapes use ${dim}`);
  const entries = describe(blocks);
  const named = new Uint8Array(blocks);
  const spans = new Array<number>(blocks).fill(1); // a pinned buffer of at least one byte
  for (let leaf = 0, at = 0; leaf < leafCount; leaf++, at += FIELDS) {
    const block = nums[at + F.block]! | 0;
    if (block < 0) continue;
    const e = entries[block]!;
    const pinned = nums[at + F.kind] === PINNED;
    const end = nums[at + F.offset]! + (pinned ? nums[at + F.length]! * STORAGE_BYTES[nums[at + F.dtype]! | 0]! : bytes[leaf]!);
    const problem = againstBlock(nums, at, pinned, end, e);
    if (problem !== null) throw bad(`${problem} (block ${block}: ${e.pinned ? "pinned" : `cuda:${e.device}`}, ${e.bytes} bytes)`, leaf);
    named[block] = 1;
    if (pinned && end > spans[block]!) spans[block] = end;
  }
  const unnamed = named.indexOf(0);
  if (unnamed >= 0) throw bad(`no leaf names block ${unnamed} of its parcel`);
  return { entries, spans, shapes, bytes, extras: made };
}

/** The shape at `dims[at..at + ndim)` (checked: integers >= 0), frozen (small ones shared). */
function shapeAt(dims: Float64Array, at: number, ndim: number): readonly number[] {
  if (ndim === 0) return SCALAR_SHAPE;
  if (ndim === 1) return vectorShape(dims[at]!);
  if (ndim === 2) return matrixShape(dims[at]!, dims[at + 1]!);
  return frozenShape(Array.from(dims.subarray(at, at + ndim)));
}

/** A DeviceTensor with no block: an empty one (address 0), on a device there is. */
function emptyDevice(offset: number, count: number, device: number): string | null {
  if (offset !== 0 || count !== 0) return `a DeviceTensor of ${count} elements has no block`;
  const devices = cudaDeviceCount();
  return device < devices ? null : `an empty DeviceTensor on cuda:${device}, of ${devices} devices`;
}

function pinnedRow(block: number, offset: number, length: number, device: number, dtype: DType, flags: number, shape: readonly number[], count: number, extra: unknown): Layout | string | null {
  const values = valuesPerElement(dtype);
  if (block < 0 || device !== 0) return "a pinned leaf's row has no block, or a device";
  if (offset % (DTYPE_SIZE[dtype] / values) !== 0 || length % values !== 0) return `a pinned ${dtype} view at byte ${offset} of ${length} values is misaligned`;
  if ((flags & NATURAL) !== 0) {
    if (extra !== null || shape.length !== 1 || shape[0] !== length || !isNaturalDType(dtype)) return `a bare ${dtype} array's shape [${shape.join(", ")}] is not [${length}]`;
    return null;
  }
  if (extra === null) return count * values === length ? null : `shape [${shape.join(", ")}] of ${dtype} is not the ${length} values of its view`;
  const layout = readLayout(extra);
  if (typeof layout === "string") return layout;
  if (layout.data !== undefined || layout.strides === undefined) return "a pinned leaf's extra has elements, or no strides";
  return layoutProblem(shape, count, layout.strides, layout.offset, length / values) ?? { strides: layout.strides, offset: layout.offset };
}

function pageable(shape: readonly number[], dtype: DType, extra: unknown): Tensor | string {
  const layout = readLayout(extra);
  if (typeof layout === "string") return layout;
  if (viewKind(layout.data) === undefined) return `a pageable Tensor's elements are ${shown(layout.data)}, not a typed array`;
  try {
    const given = layout.strides === undefined ? undefined : { strides: layout.strides, offset: layout.offset };
    return new Tensor(layout.data as TypedArray, shape, dtype, given);
  } catch (e) {
    if (e instanceof MtcError) return e.message;
    throw e;
  }
}

/** An extra's fields, each read once; the strides copied. A string says what is wrong. */
function readLayout(extra: unknown): { data: unknown; strides: number[] | undefined; offset: number } | string {
  if (typeof extra !== "object" || extra === null) return `its extra is ${shown(extra)}, not an object`;
  const { data, strides, offset } = extra as Record<string, unknown>;
  if (strides !== undefined && !Array.isArray(strides)) return `its strides are ${shown(strides)}, not an array`;
  if (!isIndex(offset as number) || (strides === undefined && offset !== 0)) return `its offset is ${shown(offset)}`;
  return { data, strides: strides === undefined ? undefined : Array.prototype.slice.call(strides), offset: offset as number };
}

/** Why the leaf at row `at` (pinned or not), whose bytes end at `end`, cannot lie in the block C described, or null. */
function againstBlock(nums: Float64Array, at: number, pinned: boolean, end: number, e: Entry): string | null {
  if (e.kind !== REF_BLOCK) return "its block is no block of memory";
  if (pinned && !e.pinned) return "a pinned leaf names a block of device memory";
  if (!pinned) {
    const device = nums[at + F.device]! | 0, code = nums[at + F.dtype]! | 0, offset = nums[at + F.offset]!;
    if (e.pinned) return "a DeviceTensor names a block of host memory";
    if (device !== e.device) return `a DeviceTensor on cuda:${device} names a block on cuda:${e.device}`;
    if (!aligned(offset, STORAGE_BYTES[code]!)) return `a ${DTYPES[code]} DeviceTensor at byte ${offset} of its block is misaligned`;
  }
  return end <= e.bytes ? null : `bytes ${nums[at + F.offset]}..${end} lie past its block`;
}

/** A pinned leaf of the receiver's buffer, as its checked row says. */
export function pinnedLeaf(buffer: ArrayBuffer, nums: Float64Array, at: number, shape: readonly number[], layout: Layout | null): TypedArray | Tensor {
  const dtype = DTYPES[nums[at + F.dtype]!]!;
  const data = viewStorage(dtype, buffer, nums[at + F.offset]!, nums[at + F.length]! / valuesPerElement(dtype))!; // aligned: checked
  if ((nums[at + F.flags]! & NATURAL) !== 0) return data;
  if (layout !== null) return new Tensor(data, shape, dtype, layout);
  return trustedTensor(data, shape, dtype);
}
