/**
 * Results moved between threads. Structured cloning drops our objects'
 * private state, so the hand-off is explicit: {@link moveResult} turns a
 * result (DeviceTensors, pinned host tensors and arrays, pageable Tensors,
 * plain data, inside arrays, plain objects and Maps) or an error into one
 * plain message, whose C references travel in a parcel (mtc/owner.h);
 * {@link takeResult} on the receiving thread rebuilds the result, owning
 * them. The message is described by message.ts, written by outgoing.ts and
 * read, as untrusted input, by take.ts.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { AsyncCopyHandle, markMoved } from "../copy/handle.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { createOwner, OWNER_PARCEL, threadOwnerId } from "../ffi/owner.ts";
import { disposeAll } from "../tensor/dispose.ts";
import { releasePinned } from "../tensor/host_output.ts";
import { errorMessage, isMoved, type Moved, MOVED, readingMessage, shown } from "./message.ts";
import { Outgoing, templateText } from "./outgoing.ts";
import { disposeGroupOf } from "./parcel_take.ts";
import { moveRunning } from "./parcel_out.ts";

export { type BuiltinErrorName, isMoved, type LayoutShape, type Moved, type MovedError, type TensorExtra } from "./message.ts";
export { takeResult } from "./take.ts";

/**
 * Moves a result out of this thread: returns one plain message to post
 * (`postMessage(moveResult(x))`), and the sender's objects become disposed
 * (DeviceTensors) or empty (pinned host arrays and tensors: the whole
 * pinned block moves, and every view of it here is emptied). The C
 * references travel in a parcel that belongs to no thread: it outlives the
 * sender (a terminated worker), and is given back when taken, dropped
 * ({@link dropMoved}, {@link dropMovedFrom}) or the process exits.
 *
 * `value`: a result (DeviceTensors, pinned or pageable host Tensors and
 * arrays, plain data, inside arrays, plain objects and Maps), an
 * AsyncCopyHandle (its result: this waits for the copy, then disposes the
 * handle), or an Error (MtcError keeps its status, code and leaf path; a
 * built-in class, TypeError or DOMException say, stays that class; a class
 * of the caller's arrives as the built-in one it extends, with its name). A
 * handle of a prepared copy to a device whose leaves are host memory
 * moves while its copy runs (once it is staged): one parcel with the
 * copy's plan, its layout sent once; takeResult waits for the copy, on
 * its own thread, and disposeMoved disposes the result per block.
 * Refused, with an MtcError naming the leaf and nothing moved: an arena's
 * tensors (move the copy's result), a DeviceTensor imported by fromDLPack
 * (its memory is another library's: copy it into libmtc's first), and a
 * leaf disposed or moved already. A pinned block that a copy submitted
 * earlier still reads or writes is handed over once that copy is over:
 * this waits for it, blocking the thread, as it does for a handle.
 *
 * Every message has a parcel, so each is taken once; the receiver trusts
 * nothing in it (an edited, stale or forged message is refused).
 *
 * @example
 * ```ts
 * // in a worker:
 * const onGpu = await startCopy(batch, "cuda:0");
 * postMessage(moveResult(onGpu));
 * // on the main thread:
 * worker.onmessage = (e) => train(takeResult(e.data));
 * ```
 */
export function moveResult<T>(value: T | AsyncCopyHandle<T>): Moved<T> {
  const sender = threadOwnerId();
  if (value instanceof AsyncCopyHandle) {
    // A prepared copy moves while it runs; the receiver waits for it.
    const running = moveRunning(value, sender);
    if (running !== null) {
      markMoved(value);
      return running as Moved<T>;
    }
    const result = value.get();
    value.dispose();
    const moved = moveResult(result as T);
    markMoved(value);
    return moved;
  }
  if (value instanceof Error) {
    const error = errorMessage(value);
    return { mtc: MOVED, parcel: newParcel(sender, 0), sender, error } as Moved<T>;
  }
  const out = new Outgoing();
  out.walk(value); // every user getter and trap runs here, once
  out.checkAlive();
  const blockCount = out.blocks.length;
  waitForCopies(out);
  const parcel = newParcel(sender, blockCount);
  const sym = library().symbols;
  for (let i = 0; i < blockCount; i++) {
    // In index order: the receiver finds block i as the parcel's ref i.
    if (sym.mtc_ref_retain_block!(parcel, out.blocks[i]!) === 0) {
      const why = sym.mtc_last_error();
      sym.mtc_parcel_drop!(parcel);
      throw new MtcError(Status.MTC_ERR_INTERNAL, `moveResult: ${why}`);
    }
  }
  // The parcel holds its own references: the sender's go with its objects.
  for (const tensor of out.devices) tensor.dispose();
  for (const leaf of out.pinnedLeaves) releasePinned(leaf);
  return {
    mtc: MOVED,
    parcel,
    sender,
    root: out.root,
    template: templateText(out.template),
    nums: out.nums.slice(0, out.numCount),
    dims: out.dims.slice(0, out.dimCount),
    data: out.data,
    extras: out.extras.some((e) => e !== null) ? out.extras : null,
  } as Moved<T>;
}

/** True where libmtc describes, takes and drops parcels as a receiver must (mtc/owner.h). */
function hasParcels(): boolean {
  return library().symbols.mtc_parcel_describe !== undefined;
}

/**
 * A new parcel for a message (every message has one, so that each is taken
 * once), or 0 where libmtc has no parcels: then only a message with no
 * blocks can move.
 */
function newParcel(sender: number, blocks: number): number {
  if (hasParcels()) return createOwner(OWNER_PARCEL, sender, "moveResult");
  if (blocks === 0) return 0;
  throw new MtcError(Status.MTC_ERR_UNSUPPORTED, "moveResult: this libmtc has no parcels (older than the bindings): results in GPU or pinned memory cannot move");
}

/**
 * Waits, for every pinned block to move, until no copy submitted so far
 * reads or writes it: the receiver may write it at once, and a copy still
 * reading it would deliver those writes. As moveResult(handle) waits for
 * its copy, this blocks the sending thread; nothing has moved yet if a
 * copy failed.
 */
function waitForCopies(out: Outgoing): void {
  const sym = library().symbols;
  for (let i = 0; i < out.blocks.length; i++) {
    if (!out.pinnedBlocks[i] || requireSymbol("mtc_block_busy", "moveResult")(out.blocks[i]!) === 0) continue;
    const status = requireSymbol("mtc_block_wait_idle", "moveResult")(out.blocks[i]!);
    if (status !== Status.MTC_OK) {
      const path = out.path(out.blockPlaces[2 * i] as number, out.blockPlaces[2 * i + 1]!);
      throw new MtcError(status, `moveResult: a copy that reads or writes this pinned memory failed, so it was not moved: ${sym.mtc_last_error()}`, { path });
    }
  }
}

/**
 * Gives back a message's references without taking it (a message no thread
 * will take). Taken already, dropped, or from another process: nothing.
 * Throws MtcError for anything that is not a message of moveResult, and for
 * one whose parcel id names an owner that is no parcel (a thread's owner
 * is never ended this way, whatever a message says).
 */
export function dropMoved(message: Moved): void {
  readingMessage("dropMoved", () => drop(message));
}

function drop(message: Moved): void {
  if (!isMoved(message)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "dropMoved: not a message of moveResult");
  const parcel: unknown = message.parcel; // read once
  if (!Number.isSafeInteger(parcel) || (parcel as number) < 0) {
    throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `dropMoved: the message is damaged (not as moveResult made it): its parcel is ${shown(parcel)}, not an id`);
  }
  const drop = library().symbols.mtc_parcel_drop;
  if (parcel === 0 || drop === undefined) return; // no parcel: nothing was retained
  const status = drop(parcel as number);
  // MTC_ERR_INVALID_STATE: no live parcel has the id (taken, dropped, another process's): nothing to give back.
  if (status === Status.MTC_ERR_INVALID_ARGUMENT) throw new MtcError(status, `dropMoved: ${library().symbols.mtc_last_error()}`);
}

/** `owner` checked as an owner id (an integer >= `least`), for `call`; throws MtcError. */
function ownerId(owner: unknown, call: string, least: number): number {
  if (Number.isSafeInteger(owner) && (owner as number) >= least) return owner as number;
  throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `${call}: ${shown(owner)} is no owner id (an integer >= ${least}, from threadOwner())`);
}

/**
 * Gives back every parcel that `owner` (a thread's owner id, from
 * {@link threadOwner}) sent and nobody took: messages lost with a worker
 * that was terminated, or a port that was closed. Returns how many. An id
 * from another process drops nothing; one that is no integer > 0 is an
 * MtcError.
 */
export function dropMovedFrom(owner: number): number {
  const id = ownerId(owner, "dropMovedFrom", 1);
  const drop = library().symbols.mtc_owner_drop_parcels;
  return drop === undefined ? 0 : drop(id);
}

/** This thread's owner id: post it to whoever may terminate this thread (it names the parcels this thread sends). */
export function threadOwner(): number {
  return threadOwnerId();
}

/**
 * False once `owner` ended: a thread's owner ends when its thread exits (C
 * then gave back what it held); false too for an id of another process.
 * One that is no integer >= 0 is an MtcError.
 */
export function ownerAlive(owner: number): boolean {
  const id = ownerId(owner, "ownerAlive", 0);
  const alive = library().symbols.mtc_owner_alive;
  return alive !== undefined && alive(id) === 1;
}

/**
 * Disposes a result that {@link takeResult} gave: a prepared copy's (moved
 * while it ran) in one step per block, anything else leaf by leaf, as
 * disposeAll does. Idempotent.
 */
export function disposeMoved(result: unknown): void {
  if (!disposeGroupOf(result)) disposeAll(result);
}

/** True when a moved message carries an error. */
export function movedError(message: Moved): boolean {
  return isMoved(message) && message.error !== undefined;
}
