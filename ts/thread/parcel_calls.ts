/**
 * A parcel's two calls on the receiving side, for both kinds of message
 * (take.ts, parcel_take.ts): what C says the parcel holds, and taking it,
 * whole and once, into this thread's owner.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { threadOwnerId } from "../ffi/owner.ts";
import { damaged } from "./message.ts";
import type { Entry } from "./take_rows.ts";

const ENTRY_WORDS = 12; // 48 bytes
const TWO_32 = 4294967296;

/**
 * What the parcel holds, from C: `capacity` entries, refused when it holds
 * another number of them (the message names blocks it does not hold, or
 * leaves some unnamed); with no capacity, every entry it holds. An id that
 * is no live parcel of this process (taken, dropped, stale, forged) is
 * MTC_ERR_INVALID_STATE.
 */
export function describeParcel(lib: MtcLibrary, parcel: number, capacity?: number): Entry[] {
  const describe = lib.symbols.mtc_parcel_describe;
  if (describe === undefined) {
    if (parcel === 0 && capacity === 0) return [];
    throw new MtcError(Status.MTC_ERR_UNSUPPORTED, "takeResult: this libmtc has no mtc_parcel_describe (older than the bindings): results in GPU or pinned memory cannot move");
  }
  if (parcel === 0) throw damaged("takeResult", "it names no parcel (every message of this libmtc has one)");
  let room = capacity ?? 8;
  for (;;) {
    const words = new Uint32Array(Math.max(room, 1) * ENTRY_WORDS);
    const count = new Uint32Array(1);
    const status = describe(parcel, words, room, count);
    if (status === Status.MTC_ERR_INVALID_STATE) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `takeResult: this result was taken already, or dropped, or it was moved in another process (parcel ${parcel} is unknown here)`);
    }
    if (status !== Status.MTC_OK) throw damaged("takeResult", lib.symbols.mtc_last_error());
    const held = count[0]!;
    if (capacity !== undefined && held !== capacity) throw damaged("takeResult", `its leaves name ${capacity} blocks but its parcel holds ${held}`);
    if (held > room) {
      room = held; // every entry asked for: ask again with room for them
      continue;
    }
    const refs = new BigUint64Array(words.buffer);
    const entries: Entry[] = [];
    for (let i = 0, w = 0; i < held; i++, w += ENTRY_WORDS) {
      entries.push({
        ref: refs[w / 2]!,
        block: words[w + 2]! + words[w + 3]! * TWO_32, // a plan's entry: the plan
        address: words[w + 4]! + words[w + 5]! * TWO_32,
        bytes: words[w + 6]! + words[w + 7]! * TWO_32,
        kind: words[w + 8]!,
        device: words[w + 9]! | 0,
        // Host memory a pinned leaf may view: page-locked, or pageable where there is no GPU (mtc/pinned.h).
        pinned: words[w + 10] === 1 || (words[w + 9]! | 0) === -1,
      });
    }
    return entries;
  }
}

/** Takes the parcel into this thread's owner if it still holds exactly `entries` (what was checked). */
export function takeParcel(lib: MtcLibrary, parcel: number, entries: Entry[]): void {
  const take = lib.symbols.mtc_parcel_take;
  if (take === undefined) return; // no parcels: describeParcel allowed only a message with no references
  const refs = new BigUint64Array(Math.max(entries.length, 1));
  for (let i = 0; i < entries.length; i++) refs[i] = entries[i]!.ref;
  const status = take(parcel, threadOwnerId(), refs, entries.length);
  if (status !== Status.MTC_OK) {
    throw new MtcError(Status.MTC_ERR_INVALID_STATE, `takeResult: this result was taken meanwhile, or dropped (parcel ${parcel}): ${lib.symbols.mtc_last_error()}`);
  }
}
