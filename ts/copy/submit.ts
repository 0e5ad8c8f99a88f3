/**
 * Stage 3 of a copy, submit: a C plan for the target with the copy's
 * options, every descriptor added in one call, the streams of the devices
 * involved bound, and the plan submitted (on the background thread, the
 * C pipeline stages and copies from here on).
 *
 * @module
 */

import { invalidArgument, invalidState, MtcError, Status, statusName } from "../base/errors.ts";
import { viewByteLength } from "../base/views.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { requireSymbol } from "../ffi/library.ts";
import type { NativeSymbols } from "../ffi/symbols.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { releasedData } from "../tensor/tensor.ts";
import { liveHandle, openScopes, type Stream, streamFor, streamOrdinal } from "../gpu/stream.ts";
import { writeAddresses } from "./describe.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE } from "./options.ts";
import { newRecord, planError, type PlanRecord, releaseRecord, u64At } from "./plan_record.ts";
import { encodeLayout, LAYOUT_SIZE } from "./layout_record.ts";
import { leafPath, type Traversal } from "./traversal.ts";

const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);
const outWords = new Uint32Array(2); // mtc_plan **, int32_t * out-parameters

/** The current CUDA device of this thread ("cuda"). */
export function currentCudaDevice(sym: NativeSymbols): number {
  const status = sym.mtc_cuda_current_device(outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_last_error() || statusName(status));
  return outWords[0]! | 0;
}

/** Tells the plan the stream of each device involved: explicit ones first, else the current stream. */
export function bindStreams(
  sym: NativeSymbols,
  plan: number,
  target: number,
  sourceDevices: readonly number[],
  explicit: readonly Stream[] | null,
): void {
  const bound: number[] = []; // devices told already: one stream per device
  const bind = (device: number, stream: Stream) => {
    if (bound.includes(device)) return;
    bound.push(device);
    const setStream = requireSymbol("mtc_plan_set_stream", "streams");
    // Checked and read from private state: no code of the caller's runs before C has it.
    const status = setStream(plan, device, liveHandle(stream));
    if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status));
  };
  if (explicit !== null) {
    for (const stream of explicit) {
      const device = streamOrdinal(stream);
      if (device === target || sourceDevices.includes(device)) bind(device, stream);
    }
  }
  if (openScopes === 0) return;
  if (target !== DEVICE_CPU) {
    const current = streamFor(target);
    if (current !== null) bind(target, current);
  }
  for (const device of sourceDevices) {
    const current = streamFor(device);
    if (current !== null) bind(device, current);
  }
}

const layoutBytes = new Uint8Array(LAYOUT_SIZE);
const layoutView = new DataView(layoutBytes.buffer);

/** Gives each strided leaf its layout (mtc_plan_set_leaf_layout), one call per leaf. */
export function setLayouts(sym: NativeSymbols, plan: number, t: Traversal): void {
  const setLayout = requireSymbol("mtc_plan_set_leaf_layout", "strided tensors");
  for (const leaf of t.layouts!) {
    encodeLayout(leaf, layoutView);
    const status = setLayout(plan, leaf.index, layoutBytes);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  }
}

/**
 * When C refused a host leaf whose array now reads as empty (a getter later
 * in the batch detached or shrank it: its address read as 0), the error
 * that says so, with its path; else undefined.
 */
function detachedError(sym: NativeSymbols, plan: number, t: Traversal): MtcError | undefined {
  const leaf = sym.mtc_plan_error_leaf(plan);
  const view = leaf >= 0 && leaf < t.count ? t.views[leaf] : undefined;
  if (view === undefined || viewByteLength(view) !== 0) return undefined;
  // Memory of the library's released by the getter (disposeAll of a pinned array): a use after dispose.
  const released = releasedData(view, "its");
  if (released !== undefined) return invalidState(`${released} while the batch was read (by a getter in it?); nothing was copied`, leafPath(t, leaf));
  return invalidArgument("its ArrayBuffer was detached or shrunk while the batch was read (by a getter in it?); nothing was copied", leafPath(t, leaf));
}

/**
 * Creates, fills and submits the plan of walk `t` (which listed at least
 * one leaf). The record holds the walk, and with it the inputs, until the
 * plan is released; on failure the plan is released and the error thrown.
 * `addressesInBulk`: the walk left the host addresses to writeAddresses.
 */
export function submitPlan(
  lib: MtcLibrary,
  t: Traversal,
  options: Required<CopyOptions>,
  streams: readonly Stream[] | null,
  addressesInBulk: boolean,
): PlanRecord {
  const sym = lib.symbols;
  encodeOptions(options, optionsView);
  const created = sym.mtc_plan_create(t.target, optionsBytes, outWords);
  if (created !== Status.MTC_OK) {
    t.dropShares();
    throw new MtcError(created, sym.mtc_last_error() || statusName(created));
  }
  const record = newRecord(lib, u64At(outWords, 0), t);
  const plan = record.plan;
  try {
    if (addressesInBulk) writeAddresses(lib, t);
    let status = sym.mtc_plan_add_leaves(plan, t.descriptors.words, t.count);
    if (status !== Status.MTC_OK) throw detachedError(sym, plan, t) ?? planError(sym, plan, status, t);
    if (t.layouts !== null) setLayouts(sym, plan, t);
    if (openScopes !== 0 || streams !== null) bindStreams(sym, plan, t.target, t.sourceDevices, streams);
    status = sym.mtc_plan_submit(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  } catch (e) {
    releaseRecord(record);
    throw e;
  }
  return record;
}
