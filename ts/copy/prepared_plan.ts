/**
 * A prepared copy's C side: the sample's plan laid out once by the C library
 * (mtc_prepared_create), and each batch's plan made from that layout and
 * submitted in one call (mtc_prepared_submit). A libmtc without prepared
 * copies, a batch whose pinned leaves differ from the sample's, or streams
 * to bind: a plan of its own, as startCopy makes.
 *
 * @module
 */

import { MtcError, Status, statusName } from "../base/errors.ts";
import { library, type MtcLibrary } from "../ffi/library.ts";
import type { NativeSymbols } from "../ffi/symbols.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE } from "./options.ts";
import { newRecord, planError, type PlanRecord, releaseRecord, u64At } from "./plan_record.ts";
import { bindStreams, setLayouts, submitPlan } from "./submit.ts";
import { openScopes } from "../gpu/stream.ts";
import { Traversal } from "./traversal.ts";
import { putLeaf, writeAddressesOf } from "./describe.ts";
import { DTYPE_SIZE } from "../tensor/dtype.ts";
import { readBatch } from "./prepared_check.ts";
import { type BatchRead, commitCache, type LeafCache, newBatchRead } from "./prepared_host.ts";
import type { Template } from "./prepared_template.ts";

const outWords = new Uint32Array(2);
const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);

/** C's prepared layouts, released when their owner is collected without dispose(). */
const preparedRegistry = new FinalizationRegistry<number>((prepared) => library().symbols.mtc_prepared_release?.(prepared));

/** One mtc_prepared (0: none), released once: by its owner's dispose(), or by the garbage collector with its owner. */
export class PreparedLayout {
  #prepared: number;

  constructor(prepared: number) {
    this.#prepared = prepared;
    if (prepared !== 0) preparedRegistry.register(this, prepared, this);
  }

  /** The mtc_prepared, 0 once released (or when there was none). */
  get handle(): number {
    return this.#prepared;
  }

  release(): void {
    const prepared = this.#prepared;
    this.#prepared = 0;
    if (prepared === 0) return;
    preparedRegistry.unregister(this);
    library().symbols.mtc_prepared_release?.(prepared);
  }
}

/**
 * Host addresses are read in bulk after the check, eight leaves a C call
 * (mtc_leaves_set_addresses): cheaper than one read a leaf in both runtimes
 * (Deno reads a pointer back slowly; Bun passes a typed array argument as
 * its data pointer at once). The check has read each view's buffer, which
 * in Bun keeps a small array's storage where it is.
 */
function usesBulkAddresses(lib: MtcLibrary): boolean {
  return lib.symbols.mtc_leaves_set_addresses !== undefined;
}

/** The descriptors of a template's leaves, with no address yet: what each batch writes its addresses into. */
export function templateWords(template: Template): Uint32Array {
  const words = new Uint32Array(Math.max(1, template.leaves.length) * 10);
  for (const leaf of template.leaves) putLeaf(words, leaf.index, 0, leaf.bytes, leaf.device, DTYPE_SIZE[leaf.dtype]);
  return words;
}

/** Each leaf's pinned flag in `words` (the sample's, once it was read). */
export function pinnedFlags(words: Uint32Array, count: number): Uint8Array {
  const flags = new Uint8Array(count);
  for (let i = 0; i < count; i++) flags[i] = words[i * 10 + 9]!;
  return flags;
}

/** One batch read for a prepared copy: its traversal, as C will see it, the read, and the output root. */
export interface PreparedBatch {
  readonly t: Traversal;
  readonly r: BatchRead;
  readonly root: unknown;
}

/**
 * Reads `batch` against `template` for a copy to `target` into `words`:
 * the check (prepared_check.ts), the host addresses (in bulk), `cache`
 * brought up to date; `t` then holds what the copy holds and says what C
 * needs (the leaf count, paths, layouts and source devices). On a throw,
 * every share taken is dropped. `sampleFlags`: null when reading the sample.
 */
export function readPrepared(
  lib: MtcLibrary,
  template: Template,
  batch: unknown,
  target: number,
  words: Uint32Array,
  cache: LeafCache,
  sampleFlags: Uint8Array | null,
): PreparedBatch {
  const t = new Traversal(target, { words });
  const bulk = usesBulkAddresses(lib);
  const count = template.leaves.length;
  const r = newBatchRead(t, words, count, bulk ? null : lib.backend.pointerOf, lib.backend.pointerOf, target, cache);
  try {
    const root = readBatch(template, batch, r, sampleFlags);
    if (bulk) writeAddressesOf(lib, words, r.bulk, count);
    commitCache(r);
    t.count = count;
    t.paths = template.paths;
    t.layouts = template.layouts;
    for (const device of template.sourceDevices) t.sourceDevices.push(device);
    return { t, r, root };
  } catch (e) {
    t.dropShares();
    throw e;
  }
}

/** A copyInto's destinations, for its C plan. */
export interface IntoSide {
  readonly words: Uint32Array;
  /** Between two GPUs: the block of each destination (0: none of libmtc's), for mtc_plan_set_destination_blocks. */
  readonly blocks: readonly number[] | null;
}

/** Names a copyInto's destination blocks (between two GPUs: mtc_plan_set_destination_blocks). */
function setBlocks(sym: NativeSymbols, plan: number, blocks: readonly number[]): number {
  const blockWords = new Uint32Array(blocks.length * 2);
  for (let i = 0; i < blocks.length; i++) {
    blockWords[2 * i] = blocks[i]! >>> 0;
    blockWords[2 * i + 1] = (blocks[i]! / 4294967296) >>> 0;
  }
  return sym.mtc_plan_set_destination_blocks!(plan, 0, blockWords, blocks.length);
}

/**
 * Adds the descriptors (and a copyInto's destinations) to a plan being
 * built. `named`: also name the destination blocks (a plan of its own; a
 * prepared layout takes them per plan, never in the template).
 */
function fill(sym: NativeSymbols, plan: number, t: Traversal, words: Uint32Array, count: number, into: IntoSide | null, named: boolean): number {
  let status = into === null
    ? sym.mtc_plan_add_leaves(plan, words, count)
    : sym.mtc_plan_add_leaves_into!(plan, words, into.words, count);
  if (status === Status.MTC_OK && named && into !== null && into.blocks !== null && sym.mtc_plan_set_destination_blocks !== undefined) {
    status = setBlocks(sym, plan, into.blocks);
  }
  if (status === Status.MTC_OK && t.layouts !== null && t.layouts.length > 0) setLayouts(sym, plan, t);
  return status;
}

/**
 * The C library's prepared layout of the sample's descriptors `words`
 * (addresses included: C checks them as it checks any plan's), or 0 for a
 * libmtc without prepared copies.
 */
export function createPrepared(lib: MtcLibrary, target: number, options: Required<CopyOptions>, t: Traversal, words: Uint32Array, count: number, into: IntoSide | null): number {
  const sym = lib.symbols;
  if (sym.mtc_prepared_create === undefined || sym.mtc_prepared_submit === undefined) return 0;
  encodeOptions(options, optionsView);
  let status = sym.mtc_plan_create(target, optionsBytes, outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_last_error() || statusName(status));
  const plan = u64At(outWords, 0);
  try {
    status = fill(sym, plan, t, words, count, into, false);
    if (status === Status.MTC_OK) status = sym.mtc_prepared_create(plan, outWords);
    if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status));
    return u64At(outWords, 0);
  } finally {
    sym.mtc_plan_release(plan); // the prepared layout keeps what it needs of it
  }
}

/**
 * A plan made from the prepared layout with this batch's descriptors, and
 * submitted: one C call, or, with streams to bind or (between two GPUs) a
 * copyInto's destination blocks to name, three (made, told, submitted).
 */
export function submitPrepared(lib: MtcLibrary, prepared: number, t: Traversal, words: Uint32Array, into: IntoSide | null): PlanRecord {
  const sym = lib.symbols;
  const blocks = into !== null && into.blocks !== null && sym.mtc_plan_set_destination_blocks !== undefined;
  const steps = blocks || openScopes !== 0;
  const status = (steps ? sym.mtc_prepared_plan! : sym.mtc_prepared_submit!)(prepared, words, null, t.count, outWords);
  if (status !== Status.MTC_OK) {
    t.dropShares();
    const message = sym.mtc_last_error() || statusName(status);
    const leaf = /^leaf (\d+): /.exec(message);
    const path = leaf === null ? undefined : t.paths?.[Number(leaf[1])];
    throw new MtcError(status, path === undefined ? message : message.slice(leaf![0].length), { path });
  }
  const record = newRecord(lib, u64At(outWords, 0), t);
  if (!steps) return record;
  return finish(sym, record, t, (plan) => blocks ? setBlocks(sym, plan, into!.blocks!) : Status.MTC_OK);
}

/**
 * The last steps of a plan being built: `before` (what it still needs),
 * the current streams bound, submitted. On failure the plan is released
 * and the error thrown with the leaf's path.
 */
function finish(sym: NativeSymbols, record: PlanRecord, t: Traversal, before: (plan: number) => number): PlanRecord {
  const plan = record.plan;
  try {
    let status = before(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
    if (openScopes !== 0) bindStreams(sym, plan, t.target, t.sourceDevices, null);
    status = sym.mtc_plan_submit(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  } catch (e) {
    releaseRecord(record);
    throw e;
  }
  return record;
}

/**
 * A plan of its own for this batch, as startCopy or copyInto makes one:
 * when a batch's pinned leaves differ from the sample's (the layout depends
 * on them), when streams are to be bound, or without prepared copies in C.
 */
export function submitOwnPlan(lib: MtcLibrary, options: Required<CopyOptions>, t: Traversal, words: Uint32Array, into: IntoSide | null): PlanRecord {
  if (into === null) return submitPlan(lib, t, options, null, false); // t's descriptors are `words`, addresses written
  const sym = lib.symbols;
  encodeOptions(options, optionsView);
  const created = sym.mtc_plan_create(t.target, optionsBytes, outWords);
  if (created !== Status.MTC_OK) {
    t.dropShares();
    throw new MtcError(created, sym.mtc_last_error() || statusName(created));
  }
  return finish(sym, newRecord(lib, u64At(outWords, 0), t), t, (plan) => fill(sym, plan, t, words, t.count, into, true));
}
