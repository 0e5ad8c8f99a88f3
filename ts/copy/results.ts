/**
 * Stage 4 of a copy, results, once the copy is over: one FFI call reads
 * where each leaf landed. For a device target the result objects exist
 * already (describe made each DeviceTensor, with its shape, dtype, device
 * and bytes, and the walk placed it): each gets its address and its block.
 * For "cpu", each leaf becomes a view of the pinned block it landed in,
 * placed where the leaf was. Everything a result says about itself was
 * fixed when describe read the leaf; the inputs are not read again. The
 * output is handed out only after this, never before the copy completed.
 *
 * @module
 */

import { BlockHolder } from "../gpu/block.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { isDeviceTensor, settleDeviceTensor, tensorKeepsTensor } from "../tensor/device_tensor.ts";
import { allocateStorage, type DType, DTYPE_SIZE, isNaturalDType } from "../tensor/dtype.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { hostLeafView, pinnedBuffer } from "../tensor/host_output.ts";
import { planError, u64At } from "./plan_record.ts";
import { MtcError, Status } from "../base/errors.ts";
import { Tensor, trustedTensor } from "../tensor/tensor.ts";
import { place, type Traversal } from "./traversal.ts";
import type { HostLeaf } from "./types.ts";

const RESULT_WORDS = 8; // sizeof(mtc_leaf_result) / 4
const RESULT_REUSED = 1;
const RESULT_PACKED = 2;

/**
 * The result buffer, reused from copy to copy. Results are read
 * synchronously, but building them may run a caller's code (a patched
 * Map.prototype.set) that collects another copy: that one gets its own.
 */
let spare: Uint32Array | null = new Uint32Array(64 * RESULT_WORDS);

function capacityFor(count: number): number {
  let n = 64;
  while (n < count) n *= 2;
  return n;
}

/**
 * Builds the output of a finished plan (`t.root[0]`): reads every leaf's
 * result with one mtc_plan_results call, retains each distinct block once.
 */
export function collectResults(lib: MtcLibrary, plan: number, t: Traversal, target: number): unknown {
  if (t.intoNodes !== null) return t.root[0]; // copyInto: the destination holds the copy; no result objects
  const count = t.count;
  let words = spare ?? new Uint32Array(capacityFor(count) * RESULT_WORDS);
  spare = null;
  if (words.length < count * RESULT_WORDS) words = new Uint32Array(capacityFor(count) * RESULT_WORDS);
  try {
    const status = lib.symbols.mtc_plan_results(plan, 0, count, words);
    if (status !== Status.MTC_OK) throw planError(lib.symbols, plan, status, t);
    if (t.build !== null) return t.build(words);
    if (target === DEVICE_CPU) collectHost(lib, t, words);
    else settleDevice(t, words);
  } finally {
    spare = words;
  }
  return t.root[0];
}

/** The walk lists no leaf already on the target, so C has none to reuse. */
function reusedError(i: number): MtcError {
  return new MtcError(Status.MTC_ERR_INTERNAL, `the copy reused leaf ${i}, which was not on the target`);
}

/**
 * Device targets, once the copy is over: each result gets its address, its
 * block and a share of it (one BlockHolder, one mtc_block_retain, per
 * distinct block).
 */
function settleDevice(t: Traversal, words: Uint32Array): void {
  const count = t.count;
  const outputs = t.outputs!;
  const holders = new Map<number, BlockHolder>();
  let lastBlock = 0;
  let last: BlockHolder | null = null;
  for (let i = 0; i < count; i++) {
    const at = i * RESULT_WORDS;
    const flags = words[at + 7]!;
    if ((flags & RESULT_REUSED) !== 0) throw reusedError(i);
    const block = u64At(words, at + 2);
    let holder: BlockHolder | null = null;
    if (block !== 0) {
      if (block === lastBlock) holder = last;
      else {
        holder = holders.get(block) ?? null;
        if (holder === null) {
          holder = new BlockHolder(block); // mtc_block_retain, once per distinct block
          holders.set(block, holder);
        }
        lastBlock = block;
        last = holder;
      }
      holder!.acquire();
    }
    settleDeviceTensor(outputs[i]!, u64At(words, at), block, u64At(words, at + 4), (flags & RESULT_PACKED) !== 0, holder);
  }
}

/** Where leaves landed in one pinned host block: its start and the bytes they span. */
interface HostSpan {
  base: number;
  end: number;
  buffer: ArrayBuffer | null;
}

/** A zero-byte device→host result: an empty array of the leaf's kind. */
function emptyHostOutput(dtype: DType, shape: readonly number[], natural: boolean): HostLeaf {
  const data = allocateStorage(dtype, 0);
  if (shape.length === 1 && natural) return data;
  return trustedTensor(data, shape, dtype);
}

/**
 * Host target: every leaf becomes a view into one ArrayBuffer per pinned
 * block (covering the leaves in it); each buffer holds one C reference to
 * its block (see tensor/host_output.ts). No bytes are copied, unless the copy
 * asked for pageable results (then each buffer is a JavaScript-owned copy).
 */
function collectHost(lib: MtcLibrary, t: Traversal, words: Uint32Array): void {
  const count = t.count;
  const spans = new Map<number, HostSpan>();
  for (let i = 0; i < count; i++) {
    const at = i * RESULT_WORDS;
    const block = u64At(words, at + 2);
    if (block === 0) continue;
    const offset = u64At(words, at + 4);
    const end = offset + t.bytes[i]!;
    const span = spans.get(block);
    if (span === undefined) spans.set(block, { base: u64At(words, at) - offset, end, buffer: null });
    else if (end > span.end) span.end = end;
  }
  for (const [block, span] of spans) {
    // usePinnedStaging: false asks for pageable results, as accvlab gives: the
    // bytes are copied out of the pinned block (which the plan still holds, and
    // frees with itself) into memory JavaScript owns.
    span.buffer = t.pageableResults
      ? lib.backend.externalBuffer(span.base, span.end).slice(0)
      : pinnedBuffer(lib, block, span.base, span.end);
  }
  for (let i = 0; i < count; i++) {
    const at = i * RESULT_WORDS;
    if ((words[at + 7]! & RESULT_REUSED) !== 0) throw reusedError(i);
    const dtype = t.dtypes[i]!;
    const shape = t.shapes[i]!;
    // A Tensor source (strided, copied dense), or a DeviceTensor copied from
    // a Tensor, comes back a Tensor, whatever its shape.
    const leaf = t.leaves[i];
    const natural = isNaturalDType(dtype) && !(leaf instanceof Tensor) && !(isDeviceTensor(leaf) && tensorKeepsTensor(leaf));
    const block = u64At(words, at + 2);
    if (block === 0) {
      place(t, i, emptyHostOutput(dtype, shape, natural));
      continue;
    }
    const span = spans.get(block)!;
    const offset = u64At(words, at) - span.base;
    const length = t.bytes[i]! / DTYPE_SIZE[dtype];
    place(t, i, hostLeafView(span.buffer!, offset, dtype, shape, length, natural));
  }
}
