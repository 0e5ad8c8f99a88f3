/**
 * What a copy holds while it has a C plan, how the plan is released (also
 * when its handle is dropped), and the exit hook that stops every plan of
 * this runtime from reading host memory before that memory goes away.
 *
 * @module
 */

import { MtcError, statusName } from "../base/errors.ts";
import { library, type MtcLibrary } from "../ffi/library.ts";
import type { NativeSymbols } from "../ffi/symbols.ts";
import { Status } from "../base/errors.ts";
import { PLAN_STATS_SIZE } from "./plan_stats.ts";
import { onExit, unrefTimer } from "../base/runtime.ts";
import { adoptPlanRef, releasePlanRef } from "../ffi/owner.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import { leafPath, type Traversal } from "./traversal.ts";

/** What a handle holds while it has a C plan; also the finalizer's held value (never the handle). */
export interface PlanRecord {
  plan: number;
  /** This thread's ref for the plan (ffi/owner.ts): what releases it. */
  ref: number;
  /** The inputs (its leaves, held views, the block shares of DeviceTensor sources) and the results. */
  traversal: Traversal | null;
  /** A copyInto to the host: its destinations, written by the handle's own poll or wait (host_into.ts). */
  hostInto?: HostDestinations;
}

/** The host destinations of a copyInto, as the walk read them. */
export interface HostDestinations {
  /** Leaf i's destination view (undefined for an empty leaf). */
  readonly views: (TypedArray | undefined)[];
  /** Its byte length then: a view found shorter later was detached or released in flight. */
  readonly lengths: number[];
}

/**
 * copyInto records to the host whose destinations are not written yet, in
 * submission order: a later copy into the same bytes supersedes them.
 */
export const pendingHostInto = new Set<PlanRecord>();

const TWO_32 = 4294967296;

/** A 64-bit value from two little-endian words. */
export function u64At(words: Uint32Array, index: number): number {
  return words[index]! + words[index + 1]! * TWO_32;
}

/**
 * The plan's error as an MtcError, with the path of the leaf it names; C's
 * "leaf N" in the message becomes that leaf's path too (an overlap names two).
 */
export function planError(sym: NativeSymbols, plan: number, status: number, t: Traversal): MtcError {
  let message = sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status);
  const leaf = sym.mtc_plan_error_leaf(plan);
  const path = leaf >= 0 && leaf < t.count ? leafPath(t, leaf) : undefined;
  if (path !== undefined) {
    message = message.replace(/^leaf \d+: /, "").replace(/\bleaf (\d+)\b/g, (text, n: string) => {
      const other = Number(n);
      if (other >= t.count) return text;
      const p = leafPath(t, other);
      return p === "" ? "(root)" : p;
    });
  }
  return new MtcError(status, message, { path });
}

const statsBytes = new Uint8Array(PLAN_STATS_SIZE);
new DataView(statsBytes.buffer).setUint32(0, PLAN_STATS_SIZE, true); // struct_size, kept: C only writes the rest

/** The plan's mtc_plan_stats now, as a fresh copy of the bytes (null where libmtc lacks the call). */
export function snapshotStats(plan: number): Uint8Array | null {
  const getStats = library().symbols.mtc_plan_get_stats;
  if (getStats === undefined) return null;
  return getStats(plan, statsBytes) === Status.MTC_OK ? statsBytes.slice() : null;
}

/** Records whose C plan is not released yet: the exit hook stops their reads. */
const livePlans = new Set<PlanRecord>();

/**
 * The record of a plan just created, with `traversal`: the plan becomes a
 * ref of this thread's (released with the thread, if nothing else does);
 * notes it (and installs the exit hook with the first one). If that fails,
 * the plan is released and the traversal's shares dropped.
 */
export function newRecord(lib: MtcLibrary, plan: number, traversal: Traversal): PlanRecord {
  let ref: number;
  try {
    ref = adoptPlanRef(plan);
  } catch (e) {
    traversal.dropShares();
    throw e;
  }
  const record: PlanRecord = { plan, ref, traversal };
  livePlans.add(record);
  if (!exitHookSet) setExitHook(lib);
  return record;
}

/** Releases the C plan (waiting for a copy in flight) and drops what the record held. */
export function releaseRecord(record: PlanRecord): void {
  livePlans.delete(record);
  pendingHostInto.delete(record); // a destination not written yet stays unwritten
  // mtc_plan_release waits for a copy in flight, then frees outputs nobody retained.
  releasePlanRef(record.ref);
  record.plan = 0;
  record.traversal?.dropShares();
  record.traversal = null;
}

/**
 * Forgets a record whose plan ref moved to a parcel (another thread's now):
 * nothing is released here, and the exit hook leaves that plan alone.
 */
export function forgetRecord(record: PlanRecord): void {
  livePlans.delete(record);
  record.plan = 0;
  record.traversal = null;
}

/**
 * Backstop for handles dropped without get() or dispose(). The record holds
 * the inputs strongly, so they outlive the copy that reads them.
 */
export const planRegistry = new FinalizationRegistry<PlanRecord>((record) => releaseWhenDone(record, 1));

/**
 * Releases a dropped handle's plan once its copy is over. mtc_plan_release
 * would wait for a copy in flight and stall the event loop that long, so
 * the release is retried on a timer that does not keep the process alive.
 */
function releaseWhenDone(record: PlanRecord, delayMs: number): void {
  if (record.plan === 0) return;
  // Never mtc_plan_poll here: it would write a copyInto's host destinations
  // at garbage-collection time. Release drops that write.
  const sym = library().symbols;
  const poll = sym.mtc_plan_poll_device ?? sym.mtc_plan_poll;
  if (poll(record.plan) === Status.MTC_IN_PROGRESS) {
    unrefTimer(setTimeout(() => releaseWhenDone(record, Math.min(delayMs * 2, 100)), delayMs));
    return;
  }
  releaseRecord(record);
}

/**
 * When this runtime (or this Deno worker) goes away it frees its JavaScript
 * memory while copies may still be in flight, and the background thread may
 * still be reading a leaf to stage it. The exit hook stops the reads of every
 * plan of this runtime first (mtc_plan_stop_reading, waiting up to
 * EXIT_WAIT_MS for a read in progress); copies already staged go on. Plans of
 * other workers are left alone. onExit says which runtime events run it;
 * libmtc itself stops every plan's reads when the process calls exit().
 */
const EXIT_WAIT_MS = 10_000;
let exitHookSet = false;

function setExitHook(lib: MtcLibrary): void {
  exitHookSet = true;
  const stop = lib.symbols.mtc_plan_stop_reading;
  if (stop === undefined) return;
  onExit(() => {
    for (const record of livePlans) stop(record.plan, EXIT_WAIT_MS);
  });
}
