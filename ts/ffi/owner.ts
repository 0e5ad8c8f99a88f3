/**
 * This thread's owner in libmtc's ledger (mtc/owner.h), and the C
 * references the bindings keep through it: every plan, block share, pinned
 * output and arena a thread holds is a ref of its owner. C gives them all
 * back when the thread exits, so a worker that is terminated (Deno frees
 * its heap with no event) still returns its device and pinned memory, once;
 * a release that comes later (a finalizer, Bun's deallocator of an external
 * buffer) finds its ref gone and does nothing.
 *
 * A libmtc without owners (older than this file) is still used: a "ref" is
 * then the block or plan itself and released the old way.
 *
 * @module
 */

import { MtcError, Status, statusName } from "../base/errors.ts";
import { library, type MtcLibrary } from "./library.ts";

/** What a ref holds (mtc_ref_kind). */
const REF_BLOCK = 1;
const REF_PLAN = 2;
/** mtc_owner_create flags. */
export const OWNER_THREAD = 1;
export const OWNER_PARCEL = 2;

const outWords = new Uint32Array(2);

/** This thread's owner; 0 where libmtc has no owners; null before the first use. */
let owner: number | null = null;

/** True when the loaded libmtc keeps owners. */
export function hasOwners(lib: MtcLibrary = library()): boolean {
  return lib.symbols.mtc_owner_create !== undefined;
}

/** @internal A new owner of `flags` (a parcel names its sender); throws MtcError. */
export function createOwner(flags: number, sender: number, call: string): number {
  const sym = library().symbols;
  const status = sym.mtc_owner_create!(flags, sender, outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, `${call}: ${sym.mtc_last_error() || statusName(status)}`);
  return outWords[0]! + outWords[1]! * 4294967296;
}

/**
 * This thread's owner id: made on first use by the thread that uses the
 * library, and given back by C, with everything it still holds, when that
 * thread exits. 0 where the library has no owners.
 */
export function threadOwnerId(): number {
  if (owner === null) owner = hasOwners() ? createOwner(OWNER_THREAD, 0, "the thread's owner") : 0;
  return owner;
}

/** A ref C refused to make: only an owner that ended does that, and this thread's cannot while it runs. */
function refError(what: string): MtcError {
  return new MtcError(Status.MTC_ERR_INTERNAL, `${what}: ${library().symbols.mtc_last_error() || "no ref was made"}`);
}

/**
 * Takes a new C reference to `block` for this thread; returns what
 * {@link releaseBlockRef} gives back. No block (0: a DLPack import's
 * holder) takes nothing and gives 0.
 */
export function retainBlockRef(block: number): number {
  if (block === 0) return 0;
  const sym = library().symbols;
  const id = threadOwnerId();
  if (id === 0) {
    sym.mtc_block_retain(block);
    return block;
  }
  const ref = sym.mtc_ref_retain_block!(id, block);
  if (ref === 0) throw refError("retaining a block");
  return ref;
}

/**
 * Makes a reference the caller holds already (`object`, of `kind`) this
 * thread's, and returns its ref (the object itself where the library has no
 * owners). On failure `release` gives the reference back and MtcError is thrown.
 */
function adopt(kind: number, object: number, what: string, release: (object: number) => void): number {
  const id = threadOwnerId();
  if (id === 0) return object;
  const ref = library().symbols.mtc_ref_adopt!(id, kind, object);
  if (ref === 0) {
    const error = refError(`keeping ${what}`);
    release(object);
    throw error;
  }
  return ref;
}

/** Releases `ref` through the owner, or with `old` where the library has no owners. */
function releaseRef(ref: number, old: (object: number) => void): void {
  const sym = library().symbols;
  if (sym.mtc_ref_release !== undefined && owner !== 0) sym.mtc_ref_release(ref);
  else old(ref);
}

/** Makes a block reference the caller holds already (a new allocation's) this thread's. */
export function adoptBlockRef(block: number): number {
  return adopt(REF_BLOCK, block, "a block", library().symbols.mtc_block_release);
}

/** Releases a block reference that {@link retainBlockRef} or {@link adoptBlockRef} gave (0: nothing). */
export function releaseBlockRef(ref: number): void {
  if (ref !== 0) releaseRef(ref, library().symbols.mtc_block_release);
}

/** Makes a new plan this thread's. */
export function adoptPlanRef(plan: number): number {
  return adopt(REF_PLAN, plan, "a plan", library().symbols.mtc_plan_release);
}

/** Releases a plan reference from {@link adoptPlanRef} (waiting for its copy in flight). */
export function releasePlanRef(ref: number): void {
  releaseRef(ref, library().symbols.mtc_plan_release);
}

let releaseCallback: number | undefined | null = null;

/**
 * The C function that releases a block ref given as context, shaped as an
 * external buffer's deallocator (Bun); undefined where the runtime has no
 * such deallocators.
 */
export function blockRefReleaseCallback(lib: MtcLibrary): number | undefined {
  if (releaseCallback === null) {
    releaseCallback = !lib.backend.externalDeallocators ? undefined
      : threadOwnerId() !== 0 ? lib.functionAddress("mtc_ref_release_callback")
      : lib.functionAddress("mtc_block_release_callback");
  }
  return releaseCallback;
}
