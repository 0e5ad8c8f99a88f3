/**
 * A prepared copy's result, once the copy is over: each copied leaf made
 * from the template (its dtype, shape and bytes, fixed when the sample was
 * prepared) and where it landed (one mtc_leaf_result each), and put at its
 * place in the containers the check made. A device target's leaves share
 * one ResultGroup, which holds one share of each block: disposing the
 * result costs one step per block. A host target's leaves view the pinned
 * blocks they landed in, as a plain copy's do.
 *
 * @module
 */

import type { MtcLibrary } from "../ffi/library.ts";
import { BlockHolder } from "../gpu/block.ts";
import { type DeviceTensor, makeDeviceTensor } from "../tensor/device_tensor.ts";
import { allocateStorage, type DType, DTYPE_SIZE, isNaturalDType } from "../tensor/dtype.ts";
import { hostLeafView, pinnedBuffer } from "../tensor/host_output.ts";
import { ResultGroup } from "../tensor/result_group.ts";
import { trustedTensor } from "../tensor/tensor.ts";
import { OBJECT } from "./path.ts";
import { u64At } from "./plan_record.ts";
import { DEVICE, type Template } from "./prepared_template.ts";
import { setValue } from "./traversal.ts";

const RESULT_WORDS = 8; // sizeof(mtc_leaf_result) / 4
const RESULT_PACKED = 2;

/** Puts leaf i's result at its place; returns the root (changed only for a root leaf). */
function put(template: Template, places: readonly (object | null)[], i: number, value: unknown, root: unknown): unknown {
  const container = places[i]!;
  if (container === null) return value;
  const parent = template.parents[i]!;
  const key = template.keys[i];
  if (parent.kind === OBJECT && key !== "__proto__") (container as Record<string, unknown>)[key as string] = value;
  else setValue(container, parent.kind, key, value);
  return root;
}

/**
 * Device target: one DeviceTensor per copied leaf, its block held by the
 * group (one BlockHolder per distinct block). Returns the root and the group.
 */
export function settlePreparedDevice(
  template: Template,
  places: readonly (object | null)[],
  root: unknown,
  words: Uint32Array,
  target: number,
): { root: unknown; group: ResultGroup } {
  const leaves = template.leaves;
  const count = leaves.length;
  const holders: BlockHolder[] = [];
  const blockHolders: (BlockHolder | null)[] = new Array(count);
  let lastBlock = 0;
  let last: BlockHolder | null = null;
  for (let i = 0; i < count; i++) {
    const block = u64At(words, i * RESULT_WORDS + 2);
    if (block !== 0 && block !== lastBlock) {
      last = holders.find((h) => h.block === block) ?? null;
      if (last === null) {
        last = new BlockHolder(block); // one C reference per distinct block
        holders.push(last);
      }
      lastBlock = block;
    }
    blockHolders[i] = block === 0 ? null : last;
  }
  const group = new ResultGroup(holders, count);
  for (let i = 0; i < count; i++) {
    const leaf = leaves[i]!;
    const at = i * RESULT_WORDS;
    const keepsTensor = leaf.what === DEVICE ? leaf.keepsTensor : leaf.tensor;
    const tensor: DeviceTensor = makeDeviceTensor(
      u64At(words, at),
      leaf.shape,
      leaf.dtype,
      target,
      leaf.bytes,
      u64At(words, at + 2),
      u64At(words, at + 4),
      (words[at + 7]! & RESULT_PACKED) !== 0,
      blockHolders[i]!,
      keepsTensor,
      group,
    );
    root = put(template, places, i, tensor, root);
  }
  return { root, group };
}

/**
 * Host target: each copied leaf (a DeviceTensor, or a strided Tensor copied
 * dense) becomes a view of the pinned block it landed in, one ArrayBuffer
 * per block (or JavaScript-owned copies, for pageable results). Returns the
 * root and the pinned buffers made (what disposing the result releases).
 */
export function settlePreparedHost(
  lib: MtcLibrary,
  template: Template,
  places: readonly (object | null)[],
  root: unknown,
  words: Uint32Array,
  pageable: boolean,
): { root: unknown; buffers: ArrayBuffer[] } {
  const leaves = template.leaves;
  const spans = new Map<number, { base: number; end: number; buffer: ArrayBuffer | null }>();
  for (let i = 0; i < leaves.length; i++) {
    const at = i * RESULT_WORDS;
    const block = u64At(words, at + 2);
    if (block === 0) continue;
    const offset = u64At(words, at + 4);
    const end = offset + leaves[i]!.bytes;
    const span = spans.get(block);
    if (span === undefined) spans.set(block, { base: u64At(words, at) - offset, end, buffer: null });
    else if (end > span.end) span.end = end;
  }
  for (const [block, span] of spans) {
    span.buffer = pageable ? lib.backend.externalBuffer(span.base, span.end).slice(0) : pinnedBuffer(lib, block, span.base, span.end);
  }
  for (let i = 0; i < leaves.length; i++) {
    const leaf = leaves[i]!;
    const at = i * RESULT_WORDS;
    const natural = isNaturalDType(leaf.dtype) && !(leaf.what === DEVICE ? leaf.keepsTensor : leaf.tensor);
    const block = u64At(words, at + 2);
    const value = block === 0
      ? emptyOutput(leaf.dtype, leaf.shape, natural)
      : hostLeafView(spans.get(block)!.buffer!, u64At(words, at) - spans.get(block)!.base, leaf.dtype, leaf.shape, leaf.bytes / DTYPE_SIZE[leaf.dtype], natural);
    root = put(template, places, i, value, root);
  }
  const buffers = pageable ? [] : [...spans.values()].map((span) => span.buffer!);
  return { root, buffers };
}

function emptyOutput(dtype: DType, shape: readonly number[], natural: boolean): unknown {
  const data = allocateStorage(dtype, 0);
  return shape.length === 1 && natural ? data : trustedTensor(data, shape, dtype);
}
