/**
 * The sending side of a prepared copy moved while it runs (move.ts's
 * moveResult of such a handle): the message carries one parcel, holding the
 * copy's plan (and the pinned blocks it reads), the id of the prepared
 * layout, and the batch's pass-through values; no row per leaf. The layout
 * itself (the containers, each leaf's dtype, shape and index in the plan)
 * travels once, with the first message of it, and its id is the id C gave
 * that message's parcel. The receiver (parcel_take.ts) keeps it and builds
 * each result from it and from what C says the plan made.
 *
 * @module
 */

import { MtcError, Status, statusName } from "../base/errors.ts";
import { type AsyncCopyHandle, detachPlan } from "../copy/handle.ts";
import { ARRAY as PATH_ARRAY, MAP as PATH_MAP } from "../copy/path.ts";
import { forgetRecord, planError, type PlanRecord, releaseRecord, u64At } from "../copy/plan_record.ts";
import { movableCopy } from "../copy/prepared.ts";
import { CONTAINER, type ContainerNode, PASS, REUSED, type Template, type TemplateNode } from "../copy/prepared_template.ts";
import { DTYPES, type DType } from "../tensor/dtype.ts";
import { library } from "../ffi/library.ts";
import { createOwner, OWNER_PARCEL, threadOwnerId } from "../ffi/owner.ts";
import { ARRAY, DATA, KEEPS_TENSOR, LEAF, type LayoutShape, MAP, MOVED, type Moved, OBJECT } from "./message.ts";

/** A layout encoded, and the id it was sent under (0: not sent yet). */
interface SentLayout {
  readonly shape: LayoutShape;
  /** How many pass-through values (and Map keys) a batch of it carries: none, for most, and then no walk. */
  readonly data: number;
  id: number;
}

/** Per prepared template: its layout as sent. */
const sentLayouts = new WeakMap<Template, SentLayout>();

const DTYPE_CODE = Object.fromEntries(DTYPES.map((d, i) => [d, i])) as Record<DType, number>;
const outWords = new Uint32Array(2);

/**
 * Moves a prepared copy's handle whose copy may still run, or returns null
 * for any other handle (and where libmtc lacks what it takes): moveResult
 * then waits for the copy, as before. Waits only until the copy reads no
 * more of this thread's pageable memory (its staging is over), never for
 * the DMA: the receiver waits for that. The handle is disposed.
 */
export function moveRunning<T>(handle: AsyncCopyHandle<T>, sender: number): Moved<T> | null {
  const copy = movableCopy(handle);
  const sym = library().symbols;
  if (copy === undefined || sym.mtc_parcel_describe === undefined || sym.mtc_ref_move === undefined || sym.mtc_plan_completion_event === undefined) {
    return null;
  }
  const record = detachPlan(handle as AsyncCopyHandle<unknown>);
  if (record === null) return null;
  const t = record.traversal!;
  if (t.shares.length > 0) {
    // Not expected (no DeviceTensor source): its shares would have to move too.
    releaseRecord(record);
    throw new MtcError(Status.MTC_ERR_INTERNAL, "moveResult: a prepared copy holding device sources cannot move while it runs");
  }
  let parcel = 0;
  try {
    // Once the copy is enqueued, its staging is over: nothing reads this thread's heap.
    const status = sym.mtc_plan_completion_event(record.plan, outWords);
    if (status !== Status.MTC_OK) throw planError(sym, record.plan, status, t);
    const event = u64At(outWords, 0);
    if (event !== 0) sym.mtc_event_release?.(event);
    parcel = createOwner(OWNER_PARCEL, sender, "moveResult");
    moveRefs(record, parcel);
  } catch (e) {
    if (parcel !== 0) sym.mtc_parcel_drop!(parcel);
    releaseRecord(record);
    throw e;
  }
  const sent = layoutOf(copy.template);
  const first = sent.id === 0;
  if (first) sent.id = parcel;
  return {
    mtc: MOVED,
    parcel,
    sender,
    layout: sent.id,
    shape: first ? sent.shape : undefined,
    data: sent.data === 0 ? [] : passValues(copy.template, copy.root),
  } as Moved<T>;
}

/** The plan's ref and the pinned blocks the copy reads, from this thread's owner into the parcel: they outlive this thread. */
function moveRefs(record: PlanRecord, parcel: number): void {
  const sym = library().symbols;
  const t = record.traversal!;
  const pinned = t.pinnedBlocks ?? [];
  const refs = new BigUint64Array(1 + pinned.length);
  refs[0] = BigInt(record.ref);
  for (let i = 0; i < pinned.length; i++) refs[i + 1] = BigInt(pinned[i]!);
  const status = sym.mtc_ref_move!(threadOwnerId(), parcel, refs, refs.length);
  if (status !== Status.MTC_OK) throw new MtcError(Status.MTC_ERR_INTERNAL, `moveResult: ${sym.mtc_last_error() || statusName(status)}`);
  // Theirs now: this thread releases none of them.
  t.pinnedBlocks = null;
  t.dropShares();
  forgetRecord(record);
}

/** The layout of `template`, encoded once. */
function layoutOf(template: Template): SentLayout {
  let sent = sentLayouts.get(template);
  if (sent === undefined) {
    sent = { ...encode(template), id: 0 };
    sentLayouts.set(template, sent);
  }
  return sent;
}

/** The template's containers breadth first (as message.ts numbers them), and its leaves in that order; and how many values a batch of it passes through. */
function encode(template: Template): { shape: LayoutShape; data: number } {
  const nodes: ContainerNode[] = [];
  const containers: (string | number)[][] = [];
  const rows: number[] = [];
  const dims: number[] = [];
  let data = 0;
  const code = (node: TemplateNode): number => {
    if (node.what === CONTAINER) {
      nodes.push(node);
      containers.push([node.kind === PATH_ARRAY ? ARRAY : node.kind === PATH_MAP ? MAP : OBJECT]);
      return nodes.length - 1;
    }
    if (node.what === PASS) {
      data++;
      return DATA;
    }
    if (node.what === REUSED) throw new MtcError(Status.MTC_ERR_INTERNAL, "moveResult: a leaf placed as it is has no place in a parcel");
    rows.push(node.index, DTYPE_CODE[node.dtype], node.tensor ? KEEPS_TENSOR : 0, node.shape.length);
    for (const n of node.shape) dims.push(n);
    return LEAF;
  };
  const root = code(template.root);
  for (let c = 0; c < nodes.length; c++) {
    const node = nodes[c]!;
    const entries = containers[c]!;
    node.children.forEach((child, i) => {
      if (node.kind === PATH_ARRAY) entries.push(code(child));
      else if (node.kind === PATH_MAP) {
        data++; // its key
        entries.push(DATA, code(child));
      }
      else entries.push(node.keys[i] as string, code(child));
    });
  }
  return { shape: { template: JSON.stringify(containers), root, rows: new Float64Array(rows), dims: new Float64Array(dims) }, data };
}

/**
 * The batch's pass-through values (and a Map's keys), in the order the
 * receiver's build reads them: from the output containers the batch's read
 * made (ours: no user code runs here).
 */
function passValues(template: Template, root: unknown): unknown[] {
  const data: unknown[] = [];
  const top = template.root;
  if (top.what === PASS) return [root];
  if (top.what !== CONTAINER) return data;
  const nodes: ContainerNode[] = [top];
  const outs: unknown[] = [root];
  for (let c = 0; c < nodes.length; c++) {
    const node = nodes[c]!;
    const out = outs[c];
    const children = node.children;
    for (let i = 0; i < children.length; i++) {
      const child = children[i]!;
      let value: unknown;
      if (node.kind === PATH_ARRAY) value = (out as unknown[])[i];
      else if (node.kind === PATH_MAP) {
        const key = node.keys[i];
        data.push(key);
        value = (out as Map<unknown, unknown>).get(key);
      } else {
        const key = node.keys[i] as string;
        value = Object.getOwnPropertyDescriptor(out, key)?.value; // "__proto__" is an own key there
      }
      if (child.what === CONTAINER) {
        nodes.push(child);
        outs.push(value);
      } else if (child.what === PASS) data.push(value);
    }
  }
  return data;
}
