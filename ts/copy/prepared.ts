/**
 * Prepared copies: a batch's structure read once, then each batch of that
 * structure copied with a check, the address reads and one C call.
 *
 * `prepareCopy(sample, device)` checks the sample as startCopy would, builds
 * its template (prepared_template.ts) and hands the C library the sample's
 * plan to lay out once (mtc_prepared_create). `start(batch)` reads the batch
 * against the template (prepared_check.ts), and submits it from the
 * prepared layout (mtc_prepared_submit); the handle builds the result from
 * the template once the copy is over (prepared_result.ts).
 *
 * @module
 */

import { markClass } from "../base/copy_identity.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { counted, defineInspect } from "../base/inspect.ts";
import { library, type MtcLibrary } from "../ffi/library.ts";
import { CURRENT_CUDA, type Device, deviceName, parseDevice } from "../gpu/device.ts";
import { releasePinned } from "../tensor/host_output.ts";
import type { ResultGroup } from "../tensor/result_group.ts";
import { releaseDescriptors, takeDescriptors } from "./describe.ts";
import { type AsyncCopyHandle, newHandle } from "./handle.ts";
import { type CopyOptions, resolveOptions } from "./options.ts";
import type { PlanRecord } from "./plan_record.ts";
import { type LeafCache, newLeafCache } from "./prepared_host.ts";
import {
  createPrepared,
  pinnedFlags,
  type PreparedBatch,
  PreparedLayout,
  readPrepared,
  submitOwnPlan,
  submitPrepared,
  templateWords,
} from "./prepared_plan.ts";
import { settlePreparedDevice, settlePreparedHost } from "./prepared_result.ts";
import { buildTemplate, type Template } from "./prepared_template.ts";
import { currentCudaDevice } from "./submit.ts";
import type { Copied } from "./types.ts";
import { walk } from "./walk.ts";

/** Only this module holds it: a PreparedCopy is made by prepareCopy, never around a template or a C pointer of the caller's. */
const MADE_HERE = Symbol("made by prepareCopy");

/** True for a PreparedCopy made by prepareCopy (a brand check: no prototype walk, no Proxy trap). */
let isPrepared: (value: unknown) => boolean;

/** Throws MtcError unless `value` is a PreparedCopy made by prepareCopy: a method called on another object. */
function checkThis(value: unknown, member: string): void {
  if (!isPrepared(value)) throw invalidArgument(`PreparedCopy.${member}: this is not a PreparedCopy made by prepareCopy`);
}

/**
 * The handles of prepared copies that can move to another thread while they
 * run (to a device, every leaf from host memory, none placed as it is):
 * their template and the output containers, pass-through values placed
 * (ts/thread/parcel_out.ts reads them).
 */
const movable = new WeakMap<object, { template: Template; root: unknown }>();

/** @internal What a handle of a prepared copy needs to move while its copy runs; undefined for any other handle. */
export function movableCopy(handle: object): { template: Template; root: unknown } | undefined {
  return movable.get(handle);
}

let makePrepared: (...fields: [
  template: Template, target: number, options: Required<CopyOptions>, words: Uint32Array, flags: Uint8Array, prepared: number, cache: LeafCache,
]) => PreparedCopy;

/**
 * A copy prepared once from a sample batch; {@link PreparedCopy.start}
 * copies each batch of the same structure. Made by {@link prepareCopy}.
 */
export class PreparedCopy<T = unknown, D extends Device = Device> {
  readonly #template: Template;
  readonly #target: number;
  readonly #options: Required<CopyOptions>;
  /** The C library's prepared layout (an mtc_prepared; handle 0 when there is none: no leaves, or an older libmtc). */
  readonly #prepared: PreparedLayout;
  /** Descriptors with the sample's fields; each batch writes its addresses into a copy. */
  readonly #words: Uint32Array;
  #spare: Uint32Array | null;
  /** The sample's pinned flag, leaf by leaf: a batch that differs goes through a plain plan. */
  readonly #sampleFlags: Uint8Array;
  /** Results not yet disposed through disposeResult: a device result's group, a host result's pinned buffers. */
  readonly #results = new WeakMap<object, ResultGroup | ArrayBuffer[]>();
  /** Each host leaf's array of the last batch, and its address. */
  readonly #cache: LeafCache;
  #disposed = false;

  static {
    markClass(this, "PreparedCopy");
    // console.log: "PreparedCopy(12 leaves to cuda:0)".
    defineInspect<PreparedCopy>(this.prototype, "PreparedCopy", (p) => {
      if (!(#template in p)) return "PreparedCopy (not made by this library)";
      return `PreparedCopy(${counted(p.#template.leaves.length, "leaf", "leaves")} to ${deviceName(p.#target)}${p.#disposed ? ", disposed" : ""})`;
    });
    makePrepared = (...fields) => new PreparedCopy(MADE_HERE, ...fields);
    isPrepared = (value) => typeof value === "object" && value !== null && #template in value;
  }

  /** Made by {@link prepareCopy} only: `new PreparedCopy()` throws MtcError. */
  private constructor(
    made: symbol,
    template: Template,
    target: number,
    options: Required<CopyOptions>,
    words: Uint32Array,
    flags: Uint8Array,
    prepared: number,
    cache: LeafCache,
  ) {
    if (made !== MADE_HERE) throw invalidArgument("new PreparedCopy(): a prepared copy is made by prepareCopy");
    this.#template = template;
    this.#target = target;
    this.#options = options;
    this.#words = words;
    this.#spare = words.slice();
    this.#sampleFlags = flags;
    this.#prepared = new PreparedLayout(prepared);
    this.#cache = cache;
  }

  /** The leaves each batch copies. */
  get leafCount(): number {
    checkThis(this, "leafCount");
    return this.#template.leaves.length;
  }

  /** Where it copies to: "cpu" or "cuda:N". */
  get device(): D {
    checkThis(this, "device");
    return deviceName(this.#target) as D;
  }

  /**
   * Starts copying `batch`, which must have the sample's structure (see
   * {@link prepareCopy}), and returns at once, as startCopy does. Throws
   * MtcError naming the first path where the batch differs from the sample;
   * then nothing is copied.
   */
  start(batch: T): AsyncCopyHandle<Copied<T, D>> {
    checkThis(this, "start");
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "PreparedCopy.start: this prepared copy was disposed");
    const lib = library();
    const template = this.#template;
    const words = this.#spare ?? this.#words.slice(); // in use: a getter in the batch started a copy of this one
    this.#spare = null;
    let record: PlanRecord | null = null;
    let read: PreparedBatch | null = null;
    try {
      read = readPrepared(lib, template, batch, this.#target, words, this.#cache, this.#sampleFlags);
      const { t, r, root } = read;
      if (t.count === 0) return newHandle<Copied<T, D>>(null, this.#target, root as Copied<T, D>, template.reused);
      t.pageableResults = !this.#options.usePinnedStaging;
      t.build = (results) => this.#settle(lib, r.places, root, results);
      record = this.#prepared.handle !== 0 && r.flagsChanged === 0
        ? submitPrepared(lib, this.#prepared.handle, t, words, null)
        : submitOwnPlan(lib, this.#options, t, words, null);
    } catch (e) {
      if (record === null) read?.t.dropShares();
      throw e;
    } finally {
      this.#spare = words; // C has copied the descriptors
    }
    const handle = newHandle<Copied<T, D>>(record, this.#target, undefined, template.reused);
    if (this.#target >= 0 && template.reused === 0 && template.sourceDevices.length === 0) movable.set(handle, { template, root: read!.root });
    return handle;
  }

  #settle(lib: MtcLibrary, places: readonly (object | null)[], root: unknown, results: Uint32Array): unknown {
    if (this.#target < 0) {
      const settled = settlePreparedHost(lib, this.#template, places, root, results, !this.#options.usePinnedStaging);
      if (typeof settled.root === "object" && settled.root !== null) this.#results.set(settled.root, settled.buffers);
      return settled.root;
    }
    const settled = settlePreparedDevice(this.#template, places, root, results, this.#target);
    if (typeof settled.root === "object" && settled.root !== null) this.#results.set(settled.root, settled.group);
    return settled.root;
  }

  /**
   * Disposes a result of this prepared copy's (what `start(batch)` gave,
   * the object itself): every DeviceTensor the copy made for it, one step
   * per block, not per leaf; each then refuses `address` as a disposed
   * tensor does. Tensors of the batch that were placed as they are (already
   * on the target) are left alone. A host result's pinned blocks are
   * released (its views read as empty). Idempotent; MtcError for a value
   * that is no result of this prepared copy. A prepared copy that copies no
   * leaf (its batches hold only values passed through or placed as they
   * are) has nothing to dispose: the call does nothing.
   */
  disposeResult(result: Copied<T, D>): void {
    checkThis(this, "disposeResult");
    if (this.#template.leaves.length === 0) return; // it copies no leaf: its results hold nothing of its own
    const held = typeof result === "object" && result !== null ? this.#results.get(result) : undefined;
    if (held === undefined) {
      throw invalidArgument("PreparedCopy.disposeResult: not a result of this prepared copy (pass the value start() gave, as it was given)");
    }
    if (Array.isArray(held)) {
      for (const buffer of held) releasePinned(buffer);
      held.length = 0;
    } else held.dispose();
  }

  /**
   * Releases the prepared layout. Copies in flight go on and their results
   * stay valid; `start` then throws. Idempotent.
   */
  dispose(): void {
    checkThis(this, "dispose");
    if (this.#disposed) return;
    this.#disposed = true;
    this.#prepared.release();
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Prepares copies to `device` of batches with the structure of `sample`:
 * the same containers with the same keys in the same order, array lengths,
 * leaf kinds, dtypes, shapes and byte lengths (strided leaves: the same
 * strides and offset over storage of the same length). Only the bytes, the
 * buffers the leaves view and the pass-through values may differ. The
 * sample is checked as startCopy checks a batch (the same errors, with
 * paths). Options: those of startCopy, less `strict` and `copyHostLeaves`.
 *
 * @example
 * ```ts
 * using prepared = prepareCopy(batches[0], "cuda:0");
 * for (const batch of batches) {
 *   const onGpu = await prepared.start(batch);
 *   train(onGpu);
 *   prepared.disposeResult(onGpu); // one step per block
 * }
 * ```
 */
export function prepareCopy<T, D extends Device>(sample: T, device: D, options?: CopyOptions): PreparedCopy<T, D> {
  let target = parseDevice(device);
  const resolved = resolveOptions(options);
  if (resolved.strict || resolved.copyHostLeaves) {
    throw invalidArgument(`prepareCopy: the option ${resolved.strict ? "strict" : "copyHostLeaves"} is not supported by prepared copies; use startCopy`);
  }
  const lib = library();
  if (target === CURRENT_CUDA) target = currentCudaDevice(lib.symbols);
  // The sample as startCopy sees it: its errors, with their paths, come first.
  const d = takeDescriptors();
  try {
    walk(sample, target, d, null, resolved).dropShares();
  } finally {
    releaseDescriptors(d);
  }
  const template = buildTemplate(sample, target);
  const count = template.leaves.length;
  const words = templateWords(template);
  const cache = newLeafCache(count);
  if (count === 0) return makePrepared(template, target, resolved, words, new Uint8Array(0), 0, cache) as PreparedCopy<T, D>;
  // The sample itself, read as a batch: its descriptors are the template's.
  const { t } = readPrepared(lib, template, sample, target, words, cache, null);
  try {
    const prepared = createPrepared(lib, target, resolved, t, words, count, null);
    return makePrepared(template, target, resolved, words, pinnedFlags(words, count), prepared, cache) as PreparedCopy<T, D>;
  } finally {
    t.dropShares();
  }
}
