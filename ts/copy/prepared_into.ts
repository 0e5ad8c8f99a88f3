/**
 * Prepared copyInto: the decode loop's copy, the same structure of sources
 * into the same DeviceTensors every step. `prepareCopyInto(sample,
 * destination)` checks the pair as copyInto would, keeps the destinations
 * and has the C library lay the pair out once; `start(source)` reads the
 * source against the sample's template (prepared_check.ts), checks that no
 * destination was disposed, and submits from the prepared layout in one C
 * call. The handle gives `destination` back once the copy is over.
 *
 * @module
 */

import { markClass } from "../base/copy_identity.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { counted, defineInspect } from "../base/inspect.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import type { BlockHolder } from "../gpu/block.ts";
import { DEVICE_CPU, deviceName } from "../gpu/device.ts";
import { type DeviceTensor, holderOf, tensorDisposed } from "../tensor/device_tensor.ts";
import { releaseDescriptors, takeDescriptors } from "./describe.ts";
import { type AsyncCopyHandle, newHandle } from "./handle.ts";
import { releaseDestinationWords, walkInto } from "./into_walk.ts";
import { type CopyOptions, resolveOptions } from "./options.ts";
import type { PlanRecord } from "./plan_record.ts";
import { type LeafCache, newLeafCache } from "./prepared_host.ts";
import {
  createPrepared,
  type IntoSide,
  pinnedFlags,
  type PreparedBatch,
  PreparedLayout,
  readPrepared,
  submitOwnPlan,
  submitPrepared,
  templateWords,
} from "./prepared_plan.ts";
import { buildTemplate, type Template } from "./prepared_template.ts";
import { leafPath } from "./traversal.ts";

/** Only this module holds it: a PreparedCopyInto is made by prepareCopyInto, never around a template or a C pointer of the caller's. */
const MADE_HERE = Symbol("made by prepareCopyInto");

/** True for a PreparedCopyInto made by prepareCopyInto (a brand check). */
let isPreparedInto: (value: unknown) => boolean;

/** Throws MtcError unless `value` is a PreparedCopyInto made by prepareCopyInto: a method called on another object. */
function checkThis(value: unknown, member: string): void {
  if (!isPreparedInto(value)) throw invalidArgument(`PreparedCopyInto.${member}: this is not a PreparedCopyInto made by prepareCopyInto`);
}

let makePreparedInto: (...fields: [
  template: Template, destination: unknown, destinations: DeviceTensor[], target: number, options: Required<CopyOptions>,
  into: IntoSide, words: Uint32Array, flags: Uint8Array, prepared: number, cache: LeafCache,
]) => PreparedCopyInto;

/**
 * A copyInto prepared once from a sample source and its destination;
 * {@link PreparedCopyInto.start} copies each source of the same structure
 * into that destination. Made by {@link prepareCopyInto}.
 */
export class PreparedCopyInto<S = unknown, D = unknown> {
  readonly #template: Template;
  readonly #destination: D;
  /** Leaf i's destination, held for as long as this lives. */
  readonly #destinations: readonly DeviceTensor[];
  /** The distinct blocks under the destinations: each copy holds a share until it is over. */
  readonly #holders: readonly BlockHolder[];
  readonly #target: number;
  readonly #options: Required<CopyOptions>;
  readonly #into: IntoSide;
  readonly #words: Uint32Array;
  #spare: Uint32Array | null;
  readonly #sampleFlags: Uint8Array;
  readonly #prepared: PreparedLayout;
  /** Each host leaf's array of the last source, and its address. */
  readonly #cache: LeafCache;
  #disposed = false;

  static {
    markClass(this, "PreparedCopyInto");
    // console.log: "PreparedCopyInto(12 leaves into cuda:0)".
    defineInspect<PreparedCopyInto>(this.prototype, "PreparedCopyInto", (p) => {
      if (!(#template in p)) return "PreparedCopyInto (not made by this library)";
      return `PreparedCopyInto(${counted(p.#template.leaves.length, "leaf", "leaves")} into ${deviceName(p.#target)}${p.#disposed ? ", disposed" : ""})`;
    });
    makePreparedInto = (...fields) => new PreparedCopyInto(MADE_HERE, ...fields);
    isPreparedInto = (value) => typeof value === "object" && value !== null && #template in value;
  }

  /** Made by {@link prepareCopyInto} only: `new PreparedCopyInto()` throws MtcError. */
  private constructor(
    made: symbol,
    template: Template,
    destination: D,
    destinations: DeviceTensor[],
    target: number,
    options: Required<CopyOptions>,
    into: IntoSide,
    words: Uint32Array,
    flags: Uint8Array,
    prepared: number,
    cache: LeafCache,
  ) {
    if (made !== MADE_HERE) throw invalidArgument("new PreparedCopyInto(): a prepared copy is made by prepareCopyInto");
    this.#template = template;
    this.#destination = destination;
    this.#destinations = destinations;
    this.#holders = [...new Set(destinations.map((d) => holderOf(d)).filter((h): h is BlockHolder => h !== null))];
    this.#target = target;
    this.#options = options;
    this.#into = into;
    this.#words = words;
    this.#spare = words.slice();
    this.#sampleFlags = flags;
    this.#prepared = new PreparedLayout(prepared);
    this.#cache = cache;
  }

  /** The leaves each copy writes. */
  get leafCount(): number {
    checkThis(this, "leafCount");
    return this.#template.leaves.length;
  }

  /**
   * Starts copying `source`, which must have the sample's structure (see
   * {@link prepareCopyInto}), into the destination, and returns at once;
   * the handle gives the destination back once the copy is over. MtcError,
   * before anything is copied, naming the first path where the source
   * differs from the sample, or a destination that was disposed.
   */
  start(source: S): AsyncCopyHandle<D> {
    checkThis(this, "start");
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "PreparedCopyInto.start: this prepared copy was disposed");
    const lib = library();
    const template = this.#template;
    const words = this.#spare ?? this.#words.slice();
    this.#spare = null;
    let record: PlanRecord | null = null;
    let read: PreparedBatch | null = null;
    try {
      read = readPrepared(lib, template, source, this.#target, words, this.#cache, this.#sampleFlags);
      const { t, r } = read;
      if (t.count === 0) return newHandle<D>(null, this.#target, this.#destination);
      // After the source's getters ran: none of them disposed a destination.
      const destinations = this.#destinations;
      for (let i = 0; i < destinations.length; i++) {
        if (tensorDisposed(destinations[i]!)) {
          throw new MtcError(Status.MTC_ERR_INVALID_STATE, "the destination DeviceTensor was disposed; the prepared copy cannot write it", { path: template.paths[i] });
        }
      }
      for (const holder of this.#holders) {
        holder.acquire(); // the destination blocks live until the copy is over
        t.shares.push(holder);
      }
      t.intoNodes = []; // the result is the destination, as it is
      t.root[0] = this.#destination;
      // The layout depends on which leaves lie in pinned memory: a batch whose pinned leaves differ gets a plan of its own.
      record = this.#prepared.handle !== 0 && r.flagsChanged === 0
        ? submitPrepared(lib, this.#prepared.handle, t, words, this.#into)
        : submitOwnPlan(lib, this.#options, t, words, this.#into);
    } catch (e) {
      if (record === null) read?.t.dropShares();
      throw e;
    } finally {
      this.#spare = words;
    }
    return newHandle<D>(record, this.#target);
  }

  /** Releases the prepared layout and the destinations. Copies in flight go on; `start` then throws. Idempotent. */
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
 * Prepares copies of sources with the structure of `sample` into
 * `destination`, whose tensor leaves are DeviceTensors on one device (the
 * decode loop: the same buffers every step). The pair is checked as
 * copyInto checks it (the same errors, with paths); "the same structure"
 * is as for {@link prepareCopy}. Host destinations are not prepared: use
 * copyInto. Options: those of copyInto, less `strict`.
 *
 * @example
 * ```ts
 * const buffers = await startCopy({ ids: new Int32Array(64), pos: new Int32Array(64) }, "cuda:0");
 * using step = prepareCopyInto({ ids: new Int32Array(64), pos: new Int32Array(64) }, buffers);
 * for (const s of steps) {
 *   await step.start({ ids: s.ids, pos: s.pos }); // the same DeviceTensors each time
 *   runGraph(buffers);
 * }
 * ```
 */
export function prepareCopyInto<S, D>(sample: S, destination: D, options?: CopyOptions): PreparedCopyInto<S, D> {
  const resolved = resolveOptions(options);
  if (resolved.strict) throw invalidArgument("prepareCopyInto: the option strict is not supported by prepared copies; use copyInto");
  const lib = library();
  requireSymbol("mtc_plan_add_leaves_into", "copyInto");
  const d = takeDescriptors();
  let w;
  try {
    w = walkInto(sample, destination, d, null); // the pair as copyInto sees it: its errors, with their paths, come first
  } finally {
    releaseDescriptors(d);
  }
  const walkPaths = Array.from({ length: w.t.count }, (_, i) => leafPath(w.t, i));
  const target = w.target;
  const pairs = w.t.leaves;
  const destinations = pairs.filter((_, k) => k % 2 === 1) as DeviceTensor[];
  const into: IntoSide = {
    words: w.destinationWords.slice(0, Math.max(1, w.t.count) * 10),
    blocks: w.t.sourceDevices.every((device) => device === target) ? null : w.destinationBlocks.slice(),
  };
  const hostDestinations = w.destinationViews.some((view) => view !== undefined);
  w.t.dropShares();
  releaseDestinationWords(w.destinationWords);
  if (target === DEVICE_CPU || hostDestinations) {
    throw invalidArgument("prepareCopyInto: the destinations must be DeviceTensors; for host destinations use copyInto");
  }
  const template = buildTemplate(sample, target, true);
  const count = template.leaves.length;
  // Leaf i's destination is the walk's leaf i: the same place in the batch (a getter could make them differ).
  if (count !== destinations.length || template.leaves.some((leaf, i) => leaf.path !== walkPaths[i])) {
    throw invalidArgument("prepareCopyInto: the sample read differently the second time (a getter in it?); it cannot be prepared");
  }
  const words = templateWords(template);
  const cache = newLeafCache(count);
  if (count === 0) return makePreparedInto(template, destination, destinations, target, resolved, into, words, new Uint8Array(0), 0, cache) as PreparedCopyInto<S, D>;
  const { t } = readPrepared(lib, template, sample, target, words, cache, null);
  try {
    const prepared = createPrepared(lib, target, resolved, t, words, count, into);
    return makePreparedInto(template, destination, destinations, target, resolved, into, words, pinnedFlags(words, count), prepared, cache) as PreparedCopyInto<S, D>;
  } finally {
    t.dropShares();
  }
}
