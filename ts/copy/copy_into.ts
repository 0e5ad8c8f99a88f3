/**
 * copyInto: a copy into memory that already exists (DeviceTensors, typed
 * arrays, host Tensors), for CUDA graphs, decode steps and reused buffers.
 * The walk (into_walk.ts) pairs every source leaf with its destination and
 * checks them; one C plan of copies into existing memory
 * (mtc_plan_add_leaves_into) does the rest; the handle is startCopy's.
 *
 * @module
 */

import { MtcError, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import type { NativeSymbols } from "../ffi/symbols.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { openScopes } from "../gpu/stream.ts";
import { releaseDescriptors, takeDescriptors, writeAddresses, writeAddressesOf } from "./describe.ts";
import { type AsyncCopyHandle, newHandle } from "./handle.ts";
import { hostDestinations, supersede } from "./host_into.ts";
import { type IntoWalk, releaseDestinationWords, walkInto } from "./into_walk.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE, resolveOptions } from "./options.ts";
import { newRecord, planError, type PlanRecord, releaseRecord, u64At } from "./plan_record.ts";
import { bindStreams, setLayouts } from "./submit.ts";

const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);
const outWords = new Uint32Array(2); // mtc_plan ** out-parameter

/**
 * Starts copying every tensor leaf of `source` into the leaf at the same
 * place in `destination`, memory that already exists, and returns at once.
 * `get()` / `await` give back `destination` itself once the copy is over:
 * no result object is made.
 *
 * `destination` mirrors `source` (the same arrays, plain objects and Map
 * keys around the leaves); at every tensor leaf of `source` it holds a leaf
 * of the same dtype and shape: a {@link DeviceTensor} when copying to a GPU
 * (from the host, the same GPU or another one), a typed array or host
 * {@link Tensor} when copying to the host (from a GPU or the host). Every
 * destination lies on one device, which is the copy's target; each source
 * leaf's own device gives its direction. Non-tensor values of `source` are
 * ignored, and parts of `destination` no source leaf meets are left alone.
 *
 * Packed host leaves reach the GPU with one scatter kernel that writes
 * every destination; GPU leaves with one gather kernel (from another GPU
 * only when every destination is a DeviceTensor of this library's, made by
 * `DeviceTensor.empty` / `zeros` or by a copy, and the pair has peer
 * access; else one peer copy a leaf); copies to the host land in pinned
 * memory first.
 *
 * When host destinations are written: inside this handle's `ready()` that
 * first returns true, `get()` or `await`, on this thread, and at no other
 * moment: `dispose()` or a dropped handle writes nothing. A destination
 * whose ArrayBuffer was detached in flight (transferred, or a pinned output
 * released) makes that call throw MtcError naming it, and nothing is
 * written. Two copies into one destination (host or device) leave the
 * later one's bytes, whatever path each took and whatever order they are
 * awaited in.
 *
 * Streams as for {@link startCopy}: with a current stream on the target
 * ({@link withStream}), the copy writes the destinations only after the
 * work queued there before this call (a kernel still reading them), and
 * that stream waits for the copy. Sources and destinations are held, with
 * their blocks, until the copy is over; neither may be changed or read
 * meanwhile.
 *
 * Throws MtcError, naming the leaf's path, before anything is copied: no
 * destination, another dtype or shape, a destination on another device
 * than the others, a disposed DeviceTensor, two destinations that overlap,
 * or a destination that overlaps any leaf's source (its own, or another's:
 * a swap or a chain; the message names both paths). Use separate memory:
 * a swap goes through a third buffer. Options are startCopy's: `strict`
 * also refuses the source's look-alike tensors (which copyInto would skip),
 * and `copyHostLeaves` changes nothing (every leaf is copied).
 *
 * @example
 * ```ts
 * const buffers = await startCopy({ ids: new Int32Array(64), pos: new Int32Array(64) }, "cuda:0");
 * for (const step of steps) {
 *   await copyInto({ ids: step.ids, pos: step.pos }, buffers); // the same DeviceTensors each time
 *   runGraph(buffers);
 * }
 * ```
 */
export function copyInto<S, D>(source: S, destination: D, options?: CopyOptions): AsyncCopyHandle<D> {
  const resolved = resolveOptions(options);
  const lib = library();
  const addInto = requireSymbol("mtc_plan_add_leaves_into", "copyInto");
  const sym = lib.symbols;
  // Host addresses are read at submit, eight leaves a call (a libmtc without that call: one by one in the walk).
  const bulk = sym.mtc_leaves_set_addresses !== undefined;
  const d = takeDescriptors();
  let record: PlanRecord;
  let target: number;
  let w: IntoWalk | undefined;
  try {
    w = walkInto(source, destination, d, bulk ? null : lib.backend.pointerOf, resolved.strict);
    const t = w.t;
    target = w.target;
    if (t.count === 0) return newHandle<D>(null, w.target, destination);
    encodeOptions(resolved, optionsView);
    const created = sym.mtc_plan_create(w.target, optionsBytes, outWords);
    if (created !== Status.MTC_OK) {
      t.dropShares();
      throw new MtcError(created, sym.mtc_last_error() || statusName(created));
    }
    record = newRecord(lib, u64At(outWords, 0), t);
    const plan = record.plan;
    try {
      if (bulk) {
        writeAddresses(lib, t);
        writeAddressesOf(lib, w.destinationWords, w.destinationViews, t.count);
      }
      let status = addInto(plan, t.descriptors.words, w.destinationWords, t.count);
      if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
      status = nameBlocks(sym, plan, w);
      if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
      if (t.layouts !== null) setLayouts(sym, plan, t);
      if (openScopes !== 0) bindStreams(sym, plan, w.target, t.sourceDevices, null);
      status = sym.mtc_plan_submit(plan);
      if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
      if (w.target === DEVICE_CPU) {
        record.hostInto = hostDestinations(w.destinationViews, w.destinationWords);
        supersede(lib, record);
      }
    } catch (e) {
      releaseRecord(record);
      throw e;
    }
  } finally {
    releaseDescriptors(d);
    if (w !== undefined) releaseDestinationWords(w.destinationWords);
  }
  return newHandle<D>(record, target);
}

/**
 * Between two GPUs, tells C which destinations are blocks of libmtc's (the
 * DeviceTensors of DeviceTensor.empty / zeros and of copies): only into
 * those may a gather kernel on the source device write over peer access
 * (mtc_plan_set_destination_blocks). Nothing to say for other copies.
 */
function nameBlocks(sym: NativeSymbols, plan: number, w: IntoWalk): number {
  const set = sym.mtc_plan_set_destination_blocks;
  if (set === undefined || w.target === DEVICE_CPU || w.t.sourceDevices.every((d) => d === w.target)) return Status.MTC_OK;
  const blocks = w.destinationBlocks;
  const words = new Uint32Array(blocks.length * 2);
  for (let i = 0; i < blocks.length; i++) {
    words[2 * i] = blocks[i]! >>> 0;
    words[2 * i + 1] = (blocks[i]! / 4294967296) >>> 0;
  }
  return set(plan, 0, words, blocks.length);
}
