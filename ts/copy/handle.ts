/**
 * AsyncCopyHandle: a copy in flight, read by ready(), get(), await or
 * dispose().
 *
 * @module
 */

import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { deviceName } from "../gpu/device.ts";
import { adoptEvent, type CudaEvent } from "../gpu/event.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { decodePlanStats, type PlanStats, reusedOnlyStats } from "./plan_stats.ts";
import { destinationsGone } from "./host_into.ts";
import { pendingHostInto, planError, type PlanRecord, planRegistry, releaseRecord, snapshotStats, u64At } from "./plan_record.ts";
import { collectResults } from "./results.ts";
import { newWaiting, type Waiting } from "./waiting.ts";
import { blockWithinLimit, type Joined, pollUntil, readWaitOptions, spin, type WaitOptions, withinLimit } from "./wait_limit.ts";

export type { WaitOptions } from "./wait_limit.ts";

const outWords = new Uint32Array(2); // mtc_event ** out-parameter

/** Handles moveResult moved to another thread (it disposed them here). */
const movedHandles = new WeakSet<object>();

/** @internal Marks a handle that moveResult moved: its later uses say so. */
export function markMoved(handle: object): void {
  movedHandles.add(handle);
}

/** `call` after dispose() (or a move): the copy and what get() had not handed out are gone. */
function disposedError(call: string, handle: object): MtcError {
  if (movedHandles.has(handle)) {
    return new MtcError(
      Status.MTC_ERR_INVALID_STATE,
      `${call}: this AsyncCopyHandle was moved to another thread (moveResult disposed it here); use the result where takeResult took it`,
    );
  }
  return new MtcError(
    Status.MTC_ERR_INVALID_STATE,
    `${call}: this AsyncCopyHandle was disposed (dispose() released the copy); take the result with get() or await before disposing`,
  );
}

const MADE_HERE = Symbol("made by libmtc");

/** @internal A handle of `record` (null: done already, with `done` as its result) for a copy to `target`. */
export let newHandle: <T>(record: PlanRecord | null, target: number, done?: T, reused?: number) => AsyncCopyHandle<T>;

/** @internal Takes the plan out of a handle whose copy may still run (parcel_out.ts): the handle is disposed, the record the caller's; null when there is none to give. */
export let detachPlan: (handle: AsyncCopyHandle<unknown>) => PlanRecord | null;

/**
 * A copy in flight. `ready()` polls, `get()` blocks, `await handle` waits
 * without blocking the event loop; `dispose()` (or `using`) releases it.
 *
 * @example
 * ```ts
 * const handle = startCopy(batch, "cuda:0");
 * while (!handle.ready()) doOtherWork();
 * const onGpu = handle.get();   // same object on every call
 * handle.dispose();             // the outputs stay valid: they own their blocks
 * ```
 */
export class AsyncCopyHandle<T = unknown> implements PromiseLike<T> {
  #record: PlanRecord | null;
  #target: number;
  /** The C status once poll or wait said the copy is over; -1 before. */
  #finished = -1;
  #result: { value: T } | null = null;
  #error: MtcError | null = null;
  #disposed = false;
  /** Deno nonblocking waits running on other threads: the plan must not be released until none is. */
  #waitsPending = 0;
  #releaseDeferred = false;
  /** The wait that `await` and wait() share while the copy is in flight; null when none runs. */
  #waiting: Waiting<T> | null = null;
  /** Leaves the traversal found on the target already (never in the C plan). */
  #reused: number;
  /** mtc_plan_stats bytes, taken when the plan was released. */
  #stats: Uint8Array | null = null;

  static {
    markClass(this, "AsyncCopyHandle");
    newHandle = (record, target, done, reused) => new AsyncCopyHandle(MADE_HERE, record, target, done, reused);
    detachPlan = (h) => {
      const record = h.#record;
      if (record === null || h.#disposed || h.#finished >= 0 || h.#waitsPending > 0 || h.#waiting !== null) return null;
      h.#record = null;
      h.#disposed = true;
      planRegistry.unregister(h);
      return record;
    };
    // console.log: "AsyncCopyHandle(to cuda:0, pending)"; from its own state (no poll, which could write destinations).
    defineInspect<AsyncCopyHandle>(this.prototype, "AsyncCopyHandle", (h) => {
      if (!(#record in h)) return "AsyncCopyHandle (not made by this library)";
      const state = h.#disposed ? "disposed"
        : h.#error !== null ? `failed: ${h.#error.code}`
        : h.#result !== null ? "done"
        : h.#finished >= 0 ? "over, not read yet"
        : "pending";
      return `AsyncCopyHandle(to ${deviceName(h.#target)}, ${state})`;
    });
  }

  /** Made by the library only (startCopy, copyInto, ToDevice): `new AsyncCopyHandle()` throws MtcError. */
  private constructor(made: symbol, record: PlanRecord | null, target: number, done?: T, reused = 0) {
    // A handle names a C plan: one made around another object would hand C an address it never gave.
    if (made !== MADE_HERE) throw invalidArgument("new AsyncCopyHandle(): a handle is made by startCopy, copyInto or ToDevice");
    this.#record = record;
    this.#target = target;
    this.#reused = reused;
    if (record === null) this.#result = { value: done as T };
    else planRegistry.register(this, record, this);
  }

  /**
   * True once the copy is over (done or failed, or the handle disposed).
   * Never blocks, except that the ready() that finds a copyInto to the host
   * over writes its destinations then.
   */
  ready(): boolean {
    if (this.#finished >= 0 || this.#record === null || this.#disposed) return true;
    const record = this.#record;
    const sym = library().symbols;
    if (record.hostInto !== undefined) {
      // Its destinations are checked once, when the device work is over,
      // just before the poll that writes them; not on every poll meanwhile.
      const pollDevice = sym.mtc_plan_poll_device;
      if (pollDevice !== undefined && pollDevice(record.plan) === Status.MTC_IN_PROGRESS) return false;
      if (this.#destinationsGone(record)) return true;
    }
    const status = sym.mtc_plan_poll(record.plan);
    if (status === Status.MTC_IN_PROGRESS) return false;
    this.#finished = status;
    pendingHostInto.delete(record);
    return true;
  }

  /**
   * The copied batch, waiting for the copy if needed (blocking the thread).
   * Returns the same object on every call; throws the copy's MtcError (the
   * same one on every call), or MTC_ERR_INVALID_STATE after dispose().
   *
   * `options.timeoutMs` limits the wait: past it, get() throws an MtcError
   * with code MTC_IN_PROGRESS and the copy goes on (the handle stays usable:
   * get, await or dispose it later). `options.signal` stops it only if it
   * has aborted when get() is called (get() then throws the signal's
   * reason, as fetch rejects), since a blocked thread runs no event: use
   * {@link wait} to abort a wait in progress. Options are read once,
   * first (a getter of theirs that disposes the handle makes get() throw
   * MTC_ERR_INVALID_STATE).
   *
   * @example
   * ```ts
   * try {
   *   const onGpu = handle.get({ timeoutMs: 100 });
   * } catch (e) {
   *   if (e instanceof MtcError && e.code === "MTC_IN_PROGRESS") console.log("still copying");
   * }
   * ```
   */
  get(options?: WaitOptions): T {
    const call = "AsyncCopyHandle.get";
    // The options first: their getters are the caller's code, which may dispose this handle.
    const limit = options === undefined ? undefined : readWaitOptions(call, options);
    if (this.#disposed) throw disposedError(call, this);
    if (limit !== undefined) blockWithinLimit(call, () => this.#result !== null || this.#error !== null || this.ready(), limit);
    if (this.#result !== null) return this.#result.value;
    if (this.#error !== null) throw this.#error;
    const record = this.#record!;
    const sym = library().symbols;
    if (this.#finished < 0 && record.hostInto !== undefined && this.#destinationsGone(record)) throw this.#error!;
    // For a copyInto to the host, this wait writes the destinations.
    if (this.#finished < 0) this.#finished = sym.mtc_plan_wait(record.plan);
    try {
      if (this.#finished !== Status.MTC_OK) throw planError(sym, record.plan, this.#finished, record.traversal!);
      this.#result = { value: this.#collect(record) };
    } catch (e) {
      this.#error = e instanceof MtcError
        ? e
        : new MtcError(Status.MTC_ERR_INTERNAL, `reading the copy's results failed: ${String(e)}`, { cause: e });
    }
    this.#releasePlan();
    if (this.#error !== null) throw this.#error;
    return this.#result!.value;
  }

  /**
   * The copied batch, as `await handle` gives it (without blocking the
   * event loop), within a limit: when `options.signal` aborts (at once if
   * it has already), the promise rejects with the signal's reason, as fetch
   * does (an AbortError DOMException for a bare `abort()`, a TimeoutError
   * for `AbortSignal.timeout`); when `options.timeoutMs` pass first, with an
   * MtcError whose code is MTC_IN_PROGRESS. Only the wait stops: the copy goes on, and the handle stays as
   * it was (await it, get() it or dispose() it later; the bytes are the
   * copy's). A wait that stopped does nothing more: a copyInto's host
   * destinations are written by a later call, never by it. Options are read
   * once, first; bad ones reject with MTC_ERR_INVALID_ARGUMENT, and a handle
   * disposed meanwhile (by a getter of theirs) with MTC_ERR_INVALID_STATE.
   *
   * @example
   * ```ts
   * const handle = startCopy(batch, "cuda:0");
   * const onGpu = await handle.wait({ signal: AbortSignal.timeout(500) });
   * ```
   */
  wait(options?: WaitOptions): Promise<T> {
    const call = "AsyncCopyHandle.wait";
    let limit;
    try {
      limit = readWaitOptions(call, options);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#disposed) return Promise.reject(disposedError(call, this));
    return withinLimit(call, () => this.#join(), limit);
  }

  /**
   * Makes `await handle` work; waits without blocking the event loop, with
   * no limit ({@link wait} takes one). Rejects with MTC_ERR_INVALID_STATE
   * after dispose(), as get() throws.
   */
  then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onRejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    if (this.#disposed) return Promise.reject(disposedError("await AsyncCopyHandle", this)).then(onFulfilled, onRejected);
    return this.#join().promise.then(onFulfilled, onRejected); // never leaves: no limit
  }

  /**
   * Releases the copy: waits for it if it is in flight (on Deno, while an
   * `await` is waiting, the C release happens when that wait returns), and
   * frees outputs that get()/await never handed out. Outputs already handed
   * out stay valid. Idempotent.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#releasePlan();
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /**
   * What the copy did: leaves, packing, blocks, bytes, DMA count, pinned
   * pool use, host times, and the device-to-host path taken. Final once the
   * copy is over; readable after get()/await and after dispose() (a
   * snapshot taken when the plan was released: partial if it was disposed
   * in flight). Throws MTC_ERR_UNSUPPORTED where libmtc lacks plan stats.
   *
   * @example
   * ```ts
   * const h = startCopy(onGpu, "cpu");
   * await h;
   * console.log(h.stats().deviceToHostPath); // "gather-kernel" on a CUDA build
   * ```
   */
  stats(): PlanStats {
    const record = this.#record;
    if (record !== null) {
      const bytes = snapshotStats(record.plan);
      if (bytes === null) requireSymbol("mtc_plan_get_stats", "plan stats");
      return decodePlanStats(bytes!, this.#reused);
    }
    if (this.#stats !== null) return decodePlanStats(this.#stats, this.#reused);
    requireSymbol("mtc_plan_get_stats", "plan stats");
    return reusedOnlyStats(this.#reused); // no plan: every leaf (if any) was on the target already
  }

  /**
   * An event that completes with the copy (on the target device; on the
   * source device for copies to the host), for other streams and libraries
   * to wait on without blocking the host. A new CudaEvent each call, owned
   * by the caller (dispose it). Null when the copy needs no device work,
   * and once the plan is released (after get()/await: the copy is over, so
   * there is nothing left to wait for). Throws MTC_ERR_INVALID_STATE after
   * dispose().
   *
   * @example
   * ```ts
   * const h = startCopy(batch, "cuda:0");
   * using done = h.completionEvent();
   * if (done) otherStream.waitEvent(done);
   * ```
   */
  completionEvent(): CudaEvent | null {
    if (this.#disposed) throw disposedError("AsyncCopyHandle.completionEvent", this);
    const record = this.#record;
    if (record === null) return null;
    const completion = requireSymbol("mtc_plan_completion_event", "completion events");
    const status = completion(record.plan, outWords);
    if (status !== Status.MTC_OK) throw planError(library().symbols, record.plan, status, record.traversal!);
    const event = u64At(outWords, 0);
    return event === 0 ? null : adoptEvent(event);
  }

  /**
   * A copyInto to the host whose destination was detached in flight: the
   * copy fails with an MtcError naming it and writes nothing (its plan is
   * released, which drops the write). False while all can be written.
   */
  #destinationsGone(record: PlanRecord): boolean {
    const gone = destinationsGone(record);
    if (gone === null) return false;
    this.#error = gone;
    this.#finished = gone.status;
    this.#releasePlan();
    return true;
  }

  #releasePlan(): void {
    const record = this.#record;
    if (record === null) return;
    if (this.#waitsPending > 0) {
      this.#releaseDeferred = true;
      return;
    }
    this.#record = null;
    planRegistry.unregister(this);
    this.#stats = snapshotStats(record.plan);
    releaseRecord(record);
  }

  /** Reads every leaf's result with one FFI call and builds the output; retains each distinct block once. */
  #collect(record: PlanRecord): T {
    return collectResults(library(), record.plan, record.traversal!, this.#target) as T;
  }

  /**
   * Joins the wait in progress, or starts one: `await` and wait() share it.
   * A caller that stops waiting (its limit came) leaves it; once every
   * caller has left, the wait stops at its next step, having polled and
   * written nothing more (a later await, wait() or get() starts anew).
   */
  #join(): Joined<T> {
    const w = this.#waiting ?? this.#startWaiting();
    w.callers++;
    let left = false;
    return {
      promise: w.promise,
      leave: () => {
        if (left) return;
        left = true;
        if (--w.callers === 0 && this.#waiting === w) this.#waiting = null;
      },
    };
  }

  #startWaiting(): Waiting<T> {
    const w = newWaiting<T>();
    this.#waiting = w;
    // Over already: done now. A Deno wait on another thread that is out
    // already (for a wait that stopped since) finishes this one when it
    // returns, so no FFI call outlives the await.
    if (this.#over(w) || this.#waitsPending > 0) return w;
    const waitNonblocking = library().symbols.mtc_plan_wait_nonblocking;
    const over = () => this.#over(w);
    spin(over, waitNonblocking !== undefined ? () => this.#waitOnThread(waitNonblocking) : () => pollUntil(over));
    return w;
  }

  /** Finishes `w` when the copy is over; true when nothing is left to do for it (also once nobody wants it). */
  #over(w: Waiting<T>): boolean {
    if (this.#waiting !== w) return true;
    if (!this.ready()) return false;
    this.#waiting = null;
    w.settle(() => this.get()); // for a copyInto to the host, get() writes the destinations
    return true;
  }

  /**
   * Deno: mtc_plan_wait_device on an FFI thread (it writes no destination);
   * the plan is not released until it returns. Its return finishes the wait
   * in progress then, if any: nothing when every caller has left.
   */
  #waitOnThread(wait: (plan: number) => Promise<number>): void {
    this.#waitsPending++;
    const returned = (error: unknown) => {
      if (--this.#waitsPending === 0 && this.#releaseDeferred) this.#releasePlan();
      const w = this.#waiting;
      if (w === null) return;
      this.#waiting = null;
      w.settle(() => {
        if (error !== undefined) throw error;
        return this.get(); // the device work is over: get() waits no longer
      });
    };
    wait(this.#record!.plan).then(() => returned(undefined), (e) => returned(e ?? new Error("the wait failed")));
  }
}
