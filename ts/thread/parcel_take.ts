/**
 * The receiving side of a prepared copy moved while it runs (parcel_out.ts
 * sends it): the message names a parcel and a layout. The layout came with
 * the first message of it and was checked then; this thread keeps it under
 * the id C gave that message's parcel. For each message, C says what the
 * parcel holds (one plan, and the pinned blocks it reads); the take waits
 * for the copy on this thread, asks C where each leaf landed, checks it
 * against the layout (leaf count, each leaf's bytes inside its block, on
 * its device), and builds the result from the layout: one DeviceTensor per
 * leaf, all in one ResultGroup (disposeMoved: one step per block). No
 * address, size or count is taken from the message.
 *
 * @module
 */

import { MtcError, Status, statusName } from "../base/errors.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { releaseBlockRef, releasePlanRef } from "../ffi/owner.ts";
import { BlockHolder } from "../gpu/block.ts";
import { type DeviceTensor, makeDeviceTensor } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, DTYPES } from "../tensor/dtype.ts";
import { ResultGroup } from "../tensor/result_group.ts";
import { frozenShape } from "../tensor/shape.ts";
import type { Build } from "./build.ts";
import { describeParcel, takeParcel } from "./parcel_calls.ts";
import { checkedTemplate, damaged, DATA, KEEPS_TENSOR, LAYOUT_FIELDS, LEAF, leafPath, shown, type Template } from "./message.ts";

/** A layout this thread received, checked. Leaf k is the template's k-th leaf; planLeaf[k] its index in the copy's plan. */
interface HeldLayout {
  readonly template: Template;
  readonly root: number;
  readonly leaves: number;
  readonly data: number;
  readonly leafOfPlan: Int32Array;
  readonly dtypes: DType[];
  readonly shapes: (readonly number[])[];
  readonly bytes: Float64Array;
  readonly keeps: Uint8Array;
}

/** Layouts received, by id, least recently used first; those are forgotten past this many. */
const MAX_LAYOUTS = 256;
const layouts = new Map<number, HeldLayout>();

/** Results taken from parcels: their group, which disposeMoved disposes. */
const groups = new WeakMap<object, ResultGroup>();

/** Time this thread's takes waited for copies, in milliseconds (the loader's consumer wait). */
export const takeWaits = { ms: 0, count: 0 };

const REF_PLAN = 2;
const REF_BLOCK = 1;
const RESULT_WORDS = 8;
const RESULT_PACKED = 2;
const TWO_32 = 4294967296;
const info = new DataView(new ArrayBuffer(32));
const infoBytes = new Uint8Array(info.buffer);
/** Where C writes each leaf's result, reused by every take on this thread (read before the take returns). */
let results = new Uint32Array(64 * RESULT_WORDS);

const isIndex = (x: number) => Number.isSafeInteger(x) && x >= 0;

/** Checks a layout that came with a message; throws MtcError (damaged). */
function checkLayout(shape: unknown): HeldLayout {
  const bad = (what: string) => damaged("takeResult", `its layout ${what}`);
  if (typeof shape !== "object" || shape === null) throw bad(`is ${shown(shape)}, not an object`);
  const { template: text, root, rows: givenRows, dims: givenDims } = shape as Record<string, unknown>;
  if (typeof text !== "string") throw bad("has no template string");
  if (!(givenRows instanceof Float64Array) || !(givenDims instanceof Float64Array)) throw bad("has rows or dims that are no Float64Array");
  const rows = new Float64Array(givenRows);
  const dims = new Float64Array(givenDims);
  if (root !== 0 && root !== LEAF && root !== DATA) throw bad(`has root ${shown(root)}`);
  const template = checkedTemplate(text);
  if ((template.containers.length > 0) !== (root === 0)) throw bad(`root ${root} does not match its template`);
  const leaves = template.leaves + (root === LEAF ? 1 : 0);
  if (rows.length !== leaves * LAYOUT_FIELDS) throw bad(`holds ${leaves} leaves but ${rows.length} numbers of rows`);
  const leafOfPlan = new Int32Array(leaves).fill(-1);
  const dtypes: DType[] = [];
  const shapes: (readonly number[])[] = [];
  const bytes = new Float64Array(leaves);
  const keeps = new Uint8Array(leaves);
  let dim = 0;
  for (let k = 0; k < leaves; k++) {
    const at = k * LAYOUT_FIELDS;
    const plan = rows[at]!, code = rows[at + 1]!, flags = rows[at + 2]!, ndim = rows[at + 3]!;
    if (!isIndex(plan) || plan >= leaves || leafOfPlan[plan] !== -1) throw bad(`names plan leaf ${plan} for leaf ${k}`);
    if (!isIndex(code) || code >= DTYPES.length) throw bad(`has dtype code ${code}`);
    if (flags !== 0 && flags !== KEEPS_TENSOR) throw bad(`has flags ${flags}`);
    if (!isIndex(ndim) || dim + ndim > dims.length) throw bad(`has a shape of ${ndim} dimensions past its dims`);
    const shape: number[] = [];
    let count = 1;
    for (let i = 0; i < ndim; i++) {
      const n = dims[dim + i]!;
      if (!isIndex(n)) throw bad(`has a shape that is not of integers >= 0`);
      shape.push(n);
      count *= n;
    }
    dim += ndim;
    const dtype = DTYPES[code]!;
    if (count * DTYPE_SIZE[dtype] > Number.MAX_SAFE_INTEGER) throw bad(`has a leaf too large`);
    leafOfPlan[plan] = k;
    dtypes.push(dtype);
    shapes.push(frozenShape(shape));
    bytes[k] = count * DTYPE_SIZE[dtype];
    keeps[k] = flags === KEEPS_TENSOR ? 1 : 0;
  }
  if (dim !== dims.length) throw bad(`has ${dims.length} extents but its shapes use ${dim}`);
  const data = template.data + (root === DATA ? 1 : 0);
  return { template, root: root as number, leaves, data, leafOfPlan, dtypes, shapes, bytes, keeps };
}

/** The layout kept under `id`, now the most recently used: the least recently used go first. */
function used(id: number): HeldLayout | undefined {
  const layout = layouts.get(id);
  if (layout !== undefined) {
    layouts.delete(id);
    layouts.set(id, layout);
  }
  return layout;
}

/** Keeps a layout under `id` (its first parcel's, taken). */
function keep(id: number, layout: HeldLayout): void {
  if (layouts.size >= MAX_LAYOUTS) layouts.delete(layouts.keys().next().value!);
  layouts.set(id, layout);
}


/**
 * Takes a message of a prepared copy moved while it runs; its fields were
 * read once by take.ts. Waits on this thread for the copy (the copy's own
 * stream; a withStream around the take changes nothing: the bytes are
 * there for every stream once this returns). A copy that failed is an
 * MtcError naming the leaf's path, and what the parcel held is given back.
 */
export function takeLayoutParcel(lib: MtcLibrary, parcel: number, id: unknown, shape: unknown, givenData: unknown, build: Build): unknown {
  if (!isIndex(id as number) || (id as number) === 0) throw damaged("takeResult", `its layout id is ${shown(id)}`);
  // A layout comes with the message whose parcel's id it takes; it is kept once that parcel was taken.
  if (shape !== undefined && id !== parcel) throw damaged("takeResult", `it brings layout ${id as number}, which is not its parcel's id`);
  const layout = shape !== undefined ? checkLayout(shape) : used(id as number);
  if (layout === undefined) {
    throw new MtcError(
      Status.MTC_ERR_INVALID_STATE,
      `takeResult: the message names prepared layout ${id as number}, which this thread has not taken: a layout travels in the first message of its prepared copy, so take the messages of one sender on one thread, in order; if that first message was dropped (dropMoved) or lost, the later ones of that copy cannot be taken: drop them too`,
    );
  }
  if (!Array.isArray(givenData)) throw damaged("takeResult", "its data is not an array");
  const length = givenData.length;
  if (length !== layout.data) throw damaged("takeResult", `its layout holds ${layout.data} values but its data has ${length}`);
  const data = new Array<unknown>(length);
  for (let i = 0; i < length; i++) data[i] = givenData[i];
  if (parcel === 0 || lib.symbols.mtc_parcel_describe === undefined) throw damaged("takeResult", "it names no parcel");
  const held = describeParcel(lib, parcel);
  if (held.length === 0 || held[0]!.kind !== REF_PLAN || held.slice(1).some((h) => h.kind !== REF_BLOCK || !h.pinned)) {
    throw damaged("takeResult", "its parcel holds no copy of a prepared layout (a plan, and the pinned blocks it reads)");
  }
  takeParcel(lib, parcel, held);
  if (shape !== undefined) keep(parcel, layout);
  try {
    // From here on the parcel is this thread's: a result that does not fit its layout is refused, and what the parcel held given back.
    return settle(lib, held[0]!.block, layout, data, build);
  } finally {
    // The copy is over (or failed): the plan and the sources it read go back; the result holds its blocks.
    releasePlanRef(Number(held[0]!.ref));
    for (let i = 1; i < held.length; i++) releaseBlockRef(Number(held[i]!.ref));
  }
}

/** Waits for the plan's copy, then builds the result from the layout and where C says each leaf landed. */
function settle(lib: MtcLibrary, plan: number, layout: HeldLayout, data: unknown[], build: Build): unknown {
  const sym = lib.symbols;
  let status = sym.mtc_plan_poll(plan);
  if (status === Status.MTC_IN_PROGRESS) {
    const began = performance.now();
    status = sym.mtc_plan_wait(plan);
    takeWaits.ms += performance.now() - began;
    takeWaits.count++;
  }
  const path = (planLeaf: number) => planLeaf >= 0 && planLeaf < layout.leaves ? leafPath(layout.template, layout.root, layout.leafOfPlan[planLeaf]!) : undefined;
  if (status !== Status.MTC_OK) {
    const message = sym.mtc_plan_last_error(plan) || statusName(status);
    throw new MtcError(status, message.replace(/^leaf \d+: /, ""), { path: path(Number(sym.mtc_plan_error_leaf(plan))) });
  }
  const count = layout.leaves;
  if (Number(sym.mtc_plan_leaf_count(plan)) !== count) throw damaged("takeResult", `its layout holds ${count} leaves but its copy ${Number(sym.mtc_plan_leaf_count(plan))}`);
  if (results.length < count * RESULT_WORDS) results = new Uint32Array(count * RESULT_WORDS);
  const words = results;
  status = sym.mtc_plan_results(plan, 0, count, words);
  if (status !== Status.MTC_OK) throw new MtcError(status, `takeResult: ${sym.mtc_plan_last_error(plan) || statusName(status)}`);
  // Each distinct block once (a batch has a few): its bytes and device from C, every leaf in it checked against them.
  const blocks: number[] = [];
  const ends: number[] = [];
  const devices: number[] = [];
  const lastLeaf: number[] = [];
  const blockOf = new Int32Array(count).fill(-1);
  let last = -1;
  for (let j = 0; j < count; j++) {
    const at = j * RESULT_WORDS;
    const block = words[at + 2]! + words[at + 3]! * TWO_32;
    const k = layout.leafOfPlan[j]!;
    if (block === 0) {
      if (layout.bytes[k]! !== 0) throw damaged("takeResult", "its layout has bytes where its copy has none", path(j));
      continue;
    }
    if (last < 0 || blocks[last] !== block) {
      last = blocks.indexOf(block);
      if (last < 0) {
        last = blocks.push(block) - 1;
        ends.push(0);
        devices.push(words[at + 6]! | 0);
        lastLeaf.push(j);
      }
    }
    blockOf[j] = last;
    const end = words[at + 4]! + words[at + 5]! * TWO_32 + layout.bytes[k]!;
    if (end > ends[last]!) {
      ends[last] = end;
      lastLeaf[last] = j;
    }
  }
  for (let b = 0; b < blocks.length; b++) {
    info.setUint32(0, 32, true);
    if (sym.mtc_block_get_info(blocks[b]!, infoBytes) !== Status.MTC_OK) throw damaged("takeResult", sym.mtc_last_error(), path(lastLeaf[b]!));
    const bytes = Number(info.getBigUint64(16, true));
    const device = info.getInt32(4, true);
    if (device !== devices[b] || device < 0 || ends[b]! > bytes) {
      throw damaged("takeResult", `its layout's leaves reach byte ${ends[b]} of a block of ${bytes} bytes on device ${device}`, path(lastLeaf[b]!));
    }
  }
  const holders = blocks.map((block) => new BlockHolder(block));
  const group = new ResultGroup(holders, count);
  const leaves = new Array<unknown>(count);
  for (let j = 0; j < count; j++) {
    const at = j * RESULT_WORDS;
    const k = layout.leafOfPlan[j]!;
    const tensor: DeviceTensor = makeDeviceTensor(
      words[at]! + words[at + 1]! * TWO_32,
      layout.shapes[k]!,
      layout.dtypes[k]!,
      words[at + 6]! | 0,
      layout.bytes[k]!,
      words[at + 2]! + words[at + 3]! * TWO_32,
      words[at + 4]! + words[at + 5]! * TWO_32,
      (words[at + 7]! & RESULT_PACKED) !== 0,
      blockOf[j]! < 0 ? null : holders[blockOf[j]!]!,
      layout.keeps[k] === 1,
      group,
    );
    leaves[k] = tensor;
  }
  const root = layout.root === LEAF ? leaves[0] : layout.root === DATA ? data[0] : build(layout.template, leaves, data);
  if (typeof root === "object" && root !== null) groups.set(root, group);
  return root;
}

/**
 * Disposes a result that takeResult gave for a prepared copy moved while it
 * ran: one step per block. True when `result` was one; false for anything
 * else (dispose it leaf by leaf: disposeAll).
 */
export function disposeGroupOf(result: unknown): boolean {
  const group = typeof result === "object" && result !== null ? groups.get(result) : undefined;
  if (group === undefined) return false;
  group.dispose();
  return true;
}
