/**
 * CUDA events: a {@link CudaEvent} is recorded on a stream
 * (`Stream.recordEvent`) or made for a copy (`completionEvent()`).
 *
 * @module
 */

import { invalidArgument, MtcError, Status, statusName } from "../base/errors.ts";
import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { library, requireSymbol } from "../ffi/library.ts";

/** A failed C call of `call` ("CudaEvent.query"): the message starts with the call's name, as every GPU call's does. */
function fail(status: number, call: string): MtcError {
  return new MtcError(status, `${call}: ${library().symbols.mtc_last_error() || statusName(status)}`);
}

/** Backstop for events dropped without dispose(): the registry holds the mtc_event pointer. */
const eventRegistry = new FinalizationRegistry<number>((event) => library().symbols.mtc_event_release?.(event));

/**
 * @internal The mtc_event pointer of a live event, read from its own state:
 * MTC_ERR_INVALID_ARGUMENT for anything that is not a CudaEvent of this
 * library (a look-alike, `Object.create(CudaEvent.prototype)`),
 * MTC_ERR_INVALID_STATE after dispose(). Runs none of the caller's code.
 */
export let eventPointer: (event: unknown, what: string) => number;

/** @internal A CudaEvent over one reference to an mtc_event, which it adopts. */
export let adoptEvent: (event: number) => CudaEvent;

/**
 * Only this module holds it; the constructor takes it, so that no caller
 * wraps a pointer of its own choosing (it would reach C as an mtc_event).
 */
const MADE_HERE = Symbol("made by libmtc");

/**
 * A recorded CUDA event: it completes when the work queued on its stream
 * before it was recorded has finished. Made by `Stream.recordEvent()`
 * and by `AsyncCopyHandle.completionEvent()`. Holds one reference to the C
 * event; `dispose()` (or `using`) drops it, garbage collection is the
 * backstop.
 *
 * @example
 * ```ts
 * using event = stream.recordEvent();
 * while (!event.query()) doOtherWork();
 * otherLibrary.streamWaitEvent(otherStream, event.handle); // a raw CUevent
 * ```
 */
export class CudaEvent {
  #event: number;

  private constructor(made: symbol, event: number) {
    if (made !== MADE_HERE) throw invalidArgument("new CudaEvent(): a CudaEvent is made by Stream.recordEvent or completionEvent()");
    this.#event = event;
    eventRegistry.register(this, event, this);
  }

  static {
    markClass(this, "CudaEvent");
    eventPointer = (event, what) => {
      if (typeof event !== "object" || event === null || !(#event in event)) {
        throw invalidArgument(`${what}: the event must be a CudaEvent (from Stream.recordEvent or completionEvent())`);
      }
      return event.#live(what);
    };
    adoptEvent = (event) => new CudaEvent(MADE_HERE, event);
    // console.log: "CudaEvent(live)", "CudaEvent(disposed)" (no query: inspecting calls no C).
    defineInspect<CudaEvent>(this.prototype, "CudaEvent", (e) => {
      if (!(#event in e)) return "CudaEvent (not made by this library)";
      return `CudaEvent(${e.#event === 0 ? "disposed" : "live"})`;
    });
  }

  /** `call`: the call the error names ("CudaEvent.query"). */
  #live(call: string): number {
    if (this.#event === 0) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${call}: this CudaEvent was disposed`);
    return this.#event;
  }

  /** The raw CUevent, for other libraries to wait on; valid until dispose(). */
  get handle(): number {
    return requireSymbol("mtc_event_handle", "events")(this.#live("CudaEvent.handle"));
  }

  /** True when the event has completed. Never blocks. */
  query(): boolean {
    const status = requireSymbol("mtc_event_query", "events")(this.#live("CudaEvent.query"));
    if (status === Status.MTC_OK) return true;
    if (status === Status.MTC_IN_PROGRESS) return false;
    throw fail(status, "CudaEvent.query");
  }

  /** Blocks the calling thread until the event has completed. */
  synchronize(): void {
    const status = requireSymbol("mtc_event_synchronize", "events")(this.#live("CudaEvent.synchronize"));
    if (status !== Status.MTC_OK) throw fail(status, "CudaEvent.synchronize");
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#event === 0;
  }

  /** Drops this object's reference to the event. Idempotent. */
  dispose(): void {
    const event = this.#event;
    if (event === 0) return;
    this.#event = 0;
    eventRegistry.unregister(this);
    library().symbols.mtc_event_release?.(event);
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
