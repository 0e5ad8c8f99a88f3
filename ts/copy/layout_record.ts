/**
 * The bytes of an mtc_leaf_layout (lib/include/mtc.h): a strided leaf's
 * shape and byte strides, written for mtc_plan_set_leaf_layout.
 *
 * @module
 */

import { MAX_STRIDED_RANK } from "../tensor/strides.ts";
import type { StridedLeaf } from "./traversal.ts";

/** sizeof(mtc_leaf_layout): struct_size, rank, then shape[8] and byte_strides[8] as uint64. */
export const LAYOUT_SIZE = 8 + 16 * MAX_STRIDED_RANK;

const TWO_32 = 4294967296;

function setU64(view: DataView, at: number, value: number): void {
  view.setUint32(at, value >>> 0, true);
  view.setUint32(at + 4, Math.floor(value / TWO_32), true);
}

/** Writes `leaf`'s layout into `view` (LAYOUT_SIZE bytes); unused dimensions are zero. */
export function encodeLayout(leaf: StridedLeaf, view: DataView): void {
  view.setUint32(0, LAYOUT_SIZE, true);
  view.setUint32(4, leaf.shape.length, true);
  for (let d = 0; d < MAX_STRIDED_RANK; d++) {
    setU64(view, 8 + 8 * d, leaf.shape[d] ?? 0);
    setU64(view, 8 + 8 * MAX_STRIDED_RANK + 8 * d, leaf.byteStrides[d] ?? 0);
  }
}
