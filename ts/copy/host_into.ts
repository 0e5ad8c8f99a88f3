/**
 * When a copyInto writes host destinations: only inside the handle's own
 * `ready()`, `get()` or `await`, on the thread that owns them (the C
 * library's poll or wait does it then, and never at release, at garbage
 * collection or for another copy). This file holds the two checks that make
 * that moment safe and ordered:
 *
 * - a destination detached in flight (transferred, or a pinned host output
 *   released) is refused with an MtcError naming it, and nothing is written;
 * - a later copyInto into the same bytes supersedes an earlier one not yet
 *   written (mtc_plan_skip_copy_out), so two copies into one destination
 *   leave the later one's bytes in whatever order they are awaited.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { viewBuffer, viewByteLength, viewByteOffset } from "../base/views.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import { type HostDestinations, pendingHostInto, type PlanRecord } from "./plan_record.ts";
import { leafPath } from "./traversal.ts";

const LEAF_WORDS = 10; // sizeof(mtc_leaf) / 4

/**
 * The host destinations of a walk, as a record keeps them: each view and
 * its byte length as the walk read it (from its mtc_leaf descriptor), so a
 * destination detached by user code later in the same walk is caught too.
 */
export function hostDestinations(views: (TypedArray | undefined)[], words: Uint32Array): HostDestinations {
  const lengths = new Array<number>(views.length);
  for (let i = 0; i < views.length; i++) lengths[i] = words[i * LEAF_WORDS + 2]! + words[i * LEAF_WORDS + 3]! * 4294967296;
  return { views, lengths };
}

/** The byte ranges of one copy's destinations, by ArrayBuffer. */
type Ranges = Map<ArrayBufferLike, [number, number][]>;

function rangesOf(into: HostDestinations): Ranges {
  const ranges: Ranges = new Map();
  for (let i = 0; i < into.views.length; i++) {
    const view = into.views[i];
    if (view === undefined || into.lengths[i] === 0) continue;
    const buffer = viewBuffer(view), begin = viewByteOffset(view);
    const list = ranges.get(buffer);
    const range: [number, number] = [begin, begin + into.lengths[i]!];
    if (list === undefined) ranges.set(buffer, [range]);
    else list.push(range);
  }
  return ranges;
}

/**
 * A new copyInto to the host (submitted, not yet written): every earlier one
 * still pending leaves the bytes they share to it. Then it is pending too.
 */
export function supersede(lib: MtcLibrary, record: PlanRecord): void {
  const into = record.hostInto!;
  if (pendingHostInto.size > 0) {
    const skip = lib.symbols.mtc_plan_skip_copy_out;
    const ranges = rangesOf(into);
    for (const earlier of pendingHostInto) {
      const before = earlier.hostInto!;
      for (let i = 0; i < before.views.length; i++) {
        const view = before.views[i];
        if (view === undefined || before.lengths[i] === 0) continue;
        const list = ranges.get(viewBuffer(view));
        if (list === undefined) continue;
        const begin = viewByteOffset(view), end = begin + before.lengths[i]!;
        if (list.some(([b, e]) => b < end && begin < e)) skip?.(earlier.plan, i);
      }
    }
  }
  pendingHostInto.add(record);
}

/**
 * Null while every destination of the record can still be written; else
 * the MtcError for the first that cannot (its buffer was detached or
 * released since the copy began), naming its path.
 */
export function destinationsGone(record: PlanRecord): MtcError | null {
  const into = record.hostInto!;
  for (let i = 0; i < into.views.length; i++) {
    const view = into.views[i];
    if (view === undefined || viewByteLength(view) === into.lengths[i]) continue;
    const path = leafPath(record.traversal!, i);
    return new MtcError(
      Status.MTC_ERR_INVALID_STATE,
      "the destination's ArrayBuffer was detached (transferred, or a pinned host output released) while the copy was in flight; no destination of this copy was written",
      { path },
    );
  }
  return null;
}
