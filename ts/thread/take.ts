/**
 * The receiving side of a moved result. A message is untrusted input (user
 * code may have edited it, kept it from another process, or forged it), so
 * the receiver reads each field once, checks its shape, asks C what the
 * parcel holds (each block's address, bytes, device and kind: none of these
 * comes from the message), checks every leaf's row against that, and only
 * then takes the parcel, whole and once. Then it makes the leaves and
 * rebuilds the containers from the template (checked and parsed once per
 * distinct structure). This runs on the thread that consumes the batches,
 * once per batch, so it does as little as it can.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { viewKind } from "../base/views.ts";
import { library, type MtcLibrary } from "../ffi/library.ts";
import { releaseBlockRef } from "../ffi/owner.ts";
import { BlockHolder } from "../gpu/block.ts";
import { type DeviceTensor, makeDeviceTensor } from "../tensor/device_tensor.ts";
import { DTYPES } from "../tensor/dtype.ts";
import { pinnedBuffer, releasePinned } from "../tensor/host_output.ts";
import {
  checkedError,
  checkedTemplate,
  DATA,
  damaged,
  errorFromMessage,
  F,
  FIELDS,
  isMoved,
  KEEPS_TENSOR,
  LEAF,
  type Moved,
  PACKED,
  PINNED,
  readingMessage,
  shown,
  TENSOR,
} from "./message.ts";
import { build } from "./build.ts";
import { takeLayoutParcel } from "./parcel_take.ts";
import { describeParcel, takeParcel } from "./parcel_calls.ts";
import { type Checked, checkRows, type Entry, type Layout, pinnedLeaf, type Received } from "./take_rows.ts";

/**
 * Takes a moved result on this thread, once: returns the value, whose
 * references are now this thread's (given back by dispose, disposeAll, the
 * garbage collector, or C when this thread exits). A moved error comes back
 * as an MtcError (or Error), returned, not thrown, with the sender's
 * stack. A message taken already, dropped, or kept from another process is
 * an MtcError (MTC_ERR_INVALID_STATE); one that is not as moveResult made
 * it (edited or forged, or a field whose getter throws) is an MtcError
 * (MTC_ERR_INVALID_ARGUMENT, naming the leaf where there is one), and
 * nothing is taken: its parcel stays for
 * {@link dropMoved} or a take of the message as it was sent.
 */
export function takeResult<T>(message: Moved<T>): T {
  return readingMessage("takeResult", () => take(message)) as T;
}

function take(message: Moved): unknown {
  const m = readMessage(message);
  const lib = library();
  if (m.layout !== undefined) return takeLayoutParcel(lib, m.parcel, m.layout, m.shape, m.data, build);
  if (m.error !== undefined) {
    takeParcel(lib, m.parcel, describeParcel(lib, m.parcel, 0));
    return errorFromMessage(m.error);
  }
  const template = checkedTemplate(m.template);
  const checked = checkRows(m, template, (capacity) => describeParcel(lib, m.parcel, capacity));
  takeParcel(lib, m.parcel, checked.entries);
  const leaves = makeLeaves(lib, m.nums, checked);
  if (m.root === LEAF) return leaves[0];
  if (m.root === DATA) return m.data[0];
  return build(template, leaves, m.data);
}

/**
 * The message's fields, each read once (a getter or a Proxy trap on a
 * message cannot change what was checked), and checked for their kinds
 * before anything is asked of C; the arrays are copied.
 */
function readMessage(message: unknown): Received {
  if (!isMoved(message)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "takeResult: not a message of moveResult");
  const { parcel, root, template, nums, dims, data, extras, error, layout, shape } = message as unknown as Record<string, unknown>;
  const bad = (what: string) => damaged("takeResult", what);
  if (!Number.isSafeInteger(parcel) || (parcel as number) < 0) throw bad(`its parcel is ${shown(parcel)}, not an id`);
  const m: Received = { parcel: parcel as number, root: 0, template: "", nums: EMPTY, dims: EMPTY, data: [], extras: null, error: undefined };
  if (error !== undefined) {
    m.error = checkedError(error);
    return m;
  }
  if (layout !== undefined) {
    // A prepared copy moved while it runs (parcel_take.ts checks the rest).
    m.layout = layout;
    m.shape = shape;
    m.data = data as unknown[];
    return m;
  }
  if (root !== 0 && root !== LEAF && root !== DATA) throw bad(`its root is ${shown(root)}`);
  if (typeof template !== "string") throw bad("its template is not a string");
  if (viewKind(nums) !== "Float64Array" || viewKind(dims) !== "Float64Array") throw bad("its nums and dims are not Float64Arrays");
  if (!Array.isArray(data)) throw bad("its data is not an array");
  if (extras !== null && extras !== undefined && !Array.isArray(extras)) throw bad("its extras are neither null nor an array");
  m.root = root;
  m.template = template;
  // Copies no user code reaches (the constructor looks up no species, as slice would).
  m.nums = new Float64Array(nums as Float64Array);
  m.dims = new Float64Array(dims as Float64Array);
  m.data = data; // copied by checkRows, once it knows their lengths
  m.extras = Array.isArray(extras) ? extras : null;
  return m;
}

const EMPTY = new Float64Array(0);

/** Every leaf, in order, from its checked row; the parcel's refs become the holders'. */
function makeLeaves(lib: MtcLibrary, nums: Float64Array, checked: Checked): unknown[] {
  const { entries, spans, shapes, extras } = checked;
  const holders: (BlockHolder | ArrayBuffer | null)[] = new Array(entries.length).fill(null);
  try {
    for (let b = 0; b < entries.length; b++) {
      const e = entries[b]!;
      const ref = Number(e.ref);
      holders[b] = e.pinned ? pinnedBuffer(lib, e.block, e.address, spans[b]!, true, ref) : new BlockHolder(e.block, ref);
    }
    const count = shapes.length;
    const leaves = new Array<unknown>(count);
    // Small integers as int32 (`| 0`): the rows are doubles, and an index or a
    // field that is a double costs JavaScriptCore a slow path.
    for (let leaf = 0, at = 0; leaf < count; leaf++, at += FIELDS) {
      const kind = nums[at + F.kind]! | 0;
      const b = nums[at + F.block]! | 0;
      const extra = extras[leaf]!;
      if (kind === TENSOR) leaves[leaf] = extra;
      else if (kind === PINNED) leaves[leaf] = pinnedLeaf(holders[b] as ArrayBuffer, nums, at, shapes[leaf]!, extra as Layout | null);
      else leaves[leaf] = deviceLeaf(nums, at, shapes[leaf]!, checked.bytes[leaf]!, b < 0 ? null : entries[b]!, b < 0 ? null : holders[b] as BlockHolder);
    }
    return leaves;
  } catch (error) {
    // Not expected (everything was checked): give back what was taken.
    holders.forEach((h, b) => {
      if (h instanceof BlockHolder) {
        h.acquire();
        h.drop();
      } else if (h !== null) releasePinned(new Uint8Array(h, 0, 0));
      else releaseBlockRef(Number(entries[b]!.ref));
    });
    throw error;
  }
}

/** A DeviceTensor at its row's offset in the block C described (none: an empty one, at address 0). */
function deviceLeaf(nums: Float64Array, at: number, shape: readonly number[], bytes: number, e: Entry | null, holder: BlockHolder | null): DeviceTensor {
  const dtype = DTYPES[nums[at + F.dtype]! | 0]!;
  const flags = nums[at + F.flags]! | 0;
  const keepsTensor = (flags & KEEPS_TENSOR) !== 0;
  if (e === null) return makeDeviceTensor(0, shape, dtype, nums[at + F.device]! | 0, 0, 0, 0, false, null, keepsTensor);
  holder!.acquire();
  const offset = nums[at + F.offset]!;
  return makeDeviceTensor(e.address + offset, shape, dtype, e.device, bytes, e.block, offset, (flags & PACKED) !== 0, holder, keepsTensor);
}
