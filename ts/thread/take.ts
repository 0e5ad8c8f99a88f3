/**
 * The receiving side of a moved result: take the parcel's references,
 * make the leaves, and rebuild the containers from the template (parsed
 * once per distinct structure). This runs on the thread that consumes the
 * batches, once per batch, so it does as little as it can.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { library } from "../ffi/library.ts";
import { releaseBlockRef, threadOwnerId } from "../ffi/owner.ts";
import { BlockHolder } from "../gpu/block.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";
import { DTYPES, type DType, type TypedArray, viewStorage } from "../tensor/dtype.ts";
import { pinnedBuffer } from "../tensor/host_output.ts";
import { frozenShape, matrixShape, SCALAR_SHAPE, vectorShape } from "../tensor/shape.ts";
import { Tensor, trustedTensor } from "../tensor/tensor.ts";
import {
  ARRAY,
  BARE_OBJECT,
  DATA,
  DEVICE,
  errorFromMessage,
  F,
  FIELDS,
  isMoved,
  KEEPS_TENSOR,
  LEAF,
  MAP,
  type Moved,
  MOVED,
  NATURAL,
  PACKED,
  PINNED,
  type TensorExtra,
} from "./message.ts";

/** Parsed templates by their text; a loader sends one structure again and again. */
const templates = new Map<string, (string | number)[][]>();
const MAX_TEMPLATES = 64;

function parsed(text: string): (string | number)[][] {
  let template = templates.get(text);
  if (template === undefined) {
    if (templates.size >= MAX_TEMPLATES) templates.clear();
    template = JSON.parse(text) as (string | number)[][];
    templates.set(text, template);
  }
  return template;
}

/**
 * Takes a moved result on this thread, once: returns the value, whose
 * references are now this thread's (given back by dispose, disposeAll, the
 * garbage collector, or C when this thread exits). A moved error comes back
 * as an MtcError (or Error), returned, not thrown, with the sender's
 * stack. A message taken already, or dropped, is an MtcError
 * (MTC_ERR_INVALID_STATE).
 */
export function takeResult<T>(message: Moved<T>): T {
  const m = readMessage(message);
  if (m.error !== undefined) return errorFromMessage(m.error) as T;
  const template = parsed(m.template);
  if (m.parcel !== 0) {
    const status = library().symbols.mtc_owner_take!(m.parcel, threadOwnerId());
    if (status !== Status.MTC_OK) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `takeResult: this result was taken already, or dropped (parcel ${m.parcel})`);
    }
  }
  const leaves = makeLeaves(m, holdBlocks(m.blocks));
  if (m.root === LEAF) return leaves[0] as T;
  if (m.root === DATA) return m.data[0] as T;
  return build(template, leaves, m.data) as T;
}

/**
 * The message's fields, each read once (a getter on a message cannot change
 * what was checked), and checked for their kinds before anything is taken.
 */
function readMessage(message: unknown): Required<Moved> {
  const bad = () => new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "takeResult: not a message of moveResult");
  if (!isMoved(message)) throw bad();
  const { parcel, sender, root, template, nums, dims, data, extras, blocks, error } = message as Required<Moved>;
  const m = { mtc: MOVED, parcel, sender, root, template, nums, dims, data, extras, blocks, error } as Required<Moved>;
  if (!Number.isSafeInteger(parcel) || parcel < 0) throw bad();
  if (error !== undefined) return m;
  const numbers = (x: unknown) => x instanceof Float64Array;
  if (typeof template !== "string" || !numbers(nums) || !numbers(dims) || !numbers(blocks) || !Array.isArray(data) || typeof root !== "number") throw bad();
  return m;
}

/** A holder for each block of the message (device: a BlockHolder; pinned: a buffer), adopting its ref. */
function holdBlocks(blocks: Float64Array): (BlockHolder | ArrayBuffer)[] {
  const lib = library();
  const holders: (BlockHolder | ArrayBuffer)[] = [];
  try {
    for (let i = 0; i < blocks.length; i += 4) {
      const block = blocks[i]!, ref = blocks[i + 1]!, base = blocks[i + 2]!, bytes = blocks[i + 3]!;
      holders.push(bytes === 0 ? new BlockHolder(block, ref) : pinnedBuffer(lib, block, base, bytes, true, ref));
    }
  } catch (e) {
    // Refs with no holder yet are this thread's: give them back.
    for (let i = holders.length * 4; i < blocks.length; i += 4) releaseBlockRef(blocks[i + 1]!);
    throw e;
  }
  return holders;
}

/** The shape at `dims[at..at + ndim)`, frozen (small ones shared). */
function shapeAt(dims: Float64Array, at: number, ndim: number): readonly number[] {
  if (ndim === 0) return SCALAR_SHAPE;
  if (ndim === 1) return vectorShape(dims[at]! | 0);
  if (ndim === 2) return matrixShape(dims[at]! | 0, dims[at + 1]! | 0);
  return frozenShape(Array.from(dims.subarray(at, at + ndim)));
}

/** Every leaf of the message, in order. */
function makeLeaves(m: Required<Moved>, holders: (BlockHolder | ArrayBuffer)[]): unknown[] {
  const nums = m.nums;
  const dims = m.dims;
  const count = nums.length / FIELDS;
  const leaves = new Array<unknown>(count);
  // Small integers as int32 (`| 0`): the rows are doubles, and an index or a
  // field that is a double costs JavaScriptCore a slow path.
  for (let leaf = 0, at = 0, dim = 0; leaf < count; leaf++, at += FIELDS) {
    const kind = nums[at + F.kind]! | 0;
    const dtype = DTYPES[nums[at + F.dtype]! | 0]!;
    const ndim = nums[at + F.ndim]! | 0;
    const shape = shapeAt(dims, dim, ndim);
    dim += ndim;
    const flags = nums[at + F.flags]! | 0;
    const b = nums[at + F.block]! | 0;
    if (kind === DEVICE) {
      const holder = b < 0 ? null : holders[b] as BlockHolder;
      if (holder !== null) holder.acquire();
      leaves[leaf] = new DeviceTensor(
        nums[at + F.a]!, shape, dtype, nums[at + F.device]! | 0, nums[at + F.bytes]!, holder === null ? 0 : holder.block,
        nums[at + F.b]!, (flags & PACKED) !== 0, holder, (flags & KEEPS_TENSOR) !== 0,
      );
    } else if (kind === PINNED) {
      leaves[leaf] = pinnedLeaf(holders[b] as ArrayBuffer, nums[at + F.a]!, nums[at + F.b]!, dtype, shape, flags, m.extras?.[leaf] ?? null);
    } else {
      const extra = m.extras![leaf]!;
      leaves[leaf] = new Tensor(extra.data!, shape, dtype, extra.strides === undefined ? undefined : { strides: extra.strides, offset: extra.offset });
    }
  }
  return leaves;
}

/** A pinned leaf of the receiver's buffer: `elements` at `byteOffset`, as the sender had it. */
function pinnedLeaf(buffer: ArrayBuffer, byteOffset: number, elements: number, dtype: DType, shape: readonly number[], flags: number, extra: TensorExtra | null): TypedArray | Tensor {
  const data = viewStorage(dtype, buffer, byteOffset, elements)!; // aligned: the sender's view was
  if ((flags & NATURAL) !== 0) return data;
  if (extra !== null) return new Tensor(data, shape, dtype, { strides: extra.strides!, offset: extra.offset });
  return trustedTensor(data, shape, dtype);
}

/** The containers of `template`, filled with the leaves and the data in the order the sender visited them. */
function build(template: (string | number)[][], leaves: unknown[], data: unknown[]): unknown {
  const count = template.length;
  const made = new Array<unknown>(count);
  for (let c = 0; c < count; c++) {
    const kind = template[c]![0];
    made[c] = kind === ARRAY ? [] : kind === MAP ? new Map() : kind === BARE_OBJECT ? Object.create(null) : {};
  }
  let leaf = 0;
  let datum = 0;
  const value = (code: number) => (code === LEAF ? leaves[leaf++] : code === DATA ? data[datum++] : made[code]);
  for (let c = 0; c < count; c++) {
    const entries = template[c]!;
    const kind = entries[0];
    const out = made[c];
    if (kind === ARRAY) {
      const array = out as unknown[];
      for (let i = 1; i < entries.length; i++) array.push(value(entries[i] as number));
    } else if (kind === MAP) {
      const map = out as Map<unknown, unknown>;
      for (let i = 1; i < entries.length; i += 2) {
        const key = value(entries[i] as number);
        map.set(key, value(entries[i + 1] as number));
      }
    } else {
      const object = out as Record<string, unknown>;
      for (let i = 1; i < entries.length; i += 2) object[entries[i] as string] = value(entries[i + 1] as number);
    }
  }
  return made[0];
}
