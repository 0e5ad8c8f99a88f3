/**
 * Waiting with a limit: `handle.get({ timeoutMs })`, `handle.wait({ signal,
 * timeoutMs })` and prefetch's `signal`. A wait whose signal aborted
 * rejects with the signal's reason, as fetch does (and the loader); one
 * whose time ran out is an MtcError with status MTC_IN_PROGRESS. Either
 * way only the wait ends; the copy goes on, because memory a copy still
 * reads or writes must not be freed under it (RELIABILITY.md, rule 2), and
 * the handle stays as it was: it can be awaited, read or disposed as before.
 * A wait that stopped does no more work: it polls nothing and writes no
 * host destination afterwards; only a later call on the handle does
 * (RELIABILITY.md, rule 4). Also here: how `await` polls (spin, pollUntil).
 *
 * @module
 */

import { checkOptionNames, invalidArgument, MtcError, showValue, Status } from "../base/errors.ts";

/**
 * What a wait reads of an AbortSignal, typed structurally so that the
 * declarations need no DOM or runtime types; a value must be a real
 * `AbortSignal` (`AbortController().signal`, `AbortSignal.timeout(ms)`).
 */
export interface AbortSignalLike {
  /** True once it has aborted. */
  readonly aborted: boolean;
  /** Why it aborted: the cause of the wait's error. */
  readonly reason?: unknown;
  /** Listens for the abort. */
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  /** Stops listening. */
  removeEventListener(type: "abort", listener: () => void): void;
}

/** How long a wait may take: the options of {@link AsyncCopyHandle.get} and {@link AsyncCopyHandle.wait}. */
export interface WaitOptions {
  /** Stop waiting when this signal aborts (at once if it has aborted already). */
  signal?: AbortSignalLike;
  /** Stop waiting after this many milliseconds, a number >= 0 (0: only if the copy is over now; Infinity: no limit). */
  timeoutMs?: number;
}

/** A wait's limits as read, once, from its options. */
export interface WaitLimit {
  readonly signal: AbortSignalLike | undefined;
  readonly timeoutMs: number | undefined;
}

const NAMES: readonly string[] = ["signal", "timeoutMs"];

/** Reads `options` once and checks them (MtcError naming `call` and the option). */
export function readWaitOptions(call: string, options: WaitOptions | undefined): WaitLimit {
  if (options === undefined) return { signal: undefined, timeoutMs: undefined };
  checkOptionNames(options, NAMES, `${call}: `);
  const signal: unknown = options.signal;
  const timeoutMs: unknown = options.timeoutMs;
  return { signal: readSignal(call, signal), timeoutMs: readTimeout(call, timeoutMs) };
}

/** The runtime's AbortSignal class (both runtimes have it). */
const ABORT_SIGNAL = (globalThis as unknown as { AbortSignal: abstract new () => AbortSignalLike }).AbortSignal;

// A signal is read through the engine's own getters and methods, never its
// properties: an own `aborted` getter or `addEventListener` would run the
// caller's code in the middle of a wait (it could dispose the handle), and
// an object that only has AbortSignal's prototype is no signal.
const abortedOf = Object.getOwnPropertyDescriptor(ABORT_SIGNAL.prototype, "aborted")!.get! as (this: AbortSignalLike) => boolean;
const reasonOf = Object.getOwnPropertyDescriptor(ABORT_SIGNAL.prototype, "reason")?.get as ((this: AbortSignalLike) => unknown) | undefined;
const EVENT_TARGET = (globalThis as unknown as { EventTarget: { prototype: AbortSignalLike } }).EventTarget.prototype;
const listen = EVENT_TARGET.addEventListener;
const unlisten = EVENT_TARGET.removeEventListener;

/** An option `signal` checked: an AbortSignal (by the engine's brand check) or undefined. */
export function readSignal(call: string, signal: unknown): AbortSignalLike | undefined {
  if (signal === undefined) return undefined;
  let real = signal instanceof ABORT_SIGNAL;
  if (real) {
    try {
      abortedOf.call(signal as AbortSignalLike);
    } catch {
      real = false; // its prototype, not its internal state
    }
  }
  if (!real) throw invalidArgument(`${call}: signal must be an AbortSignal, got ${showValue(signal)}`);
  return signal as AbortSignalLike;
}

/** True once `signal` (checked by readSignal) has aborted. */
export function isAborted(signal: AbortSignalLike | undefined): boolean {
  return signal !== undefined && abortedOf.call(signal);
}

function readTimeout(call: string, timeoutMs: unknown): number | undefined {
  if (timeoutMs === undefined) return undefined;
  if (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw invalidArgument(`${call}: timeoutMs must be a number >= 0, got ${showValue(timeoutMs)}`);
  }
  return timeoutMs === Infinity ? undefined : timeoutMs;
}

/**
 * What a wait whose signal aborted rejects with: the signal's reason, as
 * fetch and the loader do (an AbortError DOMException for a bare abort(),
 * a TimeoutError for AbortSignal.timeout()). Read through the engine's
 * getter; a runtime without it gets an AbortError of ours.
 */
export function abortReason(signal: AbortSignalLike): unknown {
  return reasonOf !== undefined ? reasonOf.call(signal) : new DOMException("the wait was aborted", "AbortError");
}

/** The error of a wait that stopped: the signal's reason, or an MtcError (MTC_IN_PROGRESS) when its time ran out. */
export function waitStopped(call: string, limit: WaitLimit, timedOut: boolean): unknown {
  if (!timedOut) return abortReason(limit.signal!);
  return new MtcError(
    Status.MTC_IN_PROGRESS,
    `${call}: the wait timed out after ${limit.timeoutMs} ms; the copy goes on (await, get() or dispose() the handle as before)`,
  );
}

/** setTimeout takes at most this many ms; a longer limit is no limit in practice. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A wait the handle runs for the callers that joined it. */
export interface Joined<T> {
  /** Its outcome: the handle's result or error. */
  readonly promise: Promise<T>;
  /**
   * This caller no longer wants the outcome. Once no caller does, the wait
   * stops: nothing more is polled, and no destination is written for it.
   */
  leave(): void;
}

/**
 * What the wait `join()` joins gives, or a rejection with
 * {@link waitStopped} when the limit comes first (at once for a signal that
 * has aborted already, without joining). A caller that stops leaves the
 * wait, so a wait nobody wants any more does no more work: only a later
 * poll, wait or get of the handle writes a copy's host destinations. The
 * timer and the abort listener go with the first outcome; a later outcome
 * of the promise is handled (never an unhandled rejection).
 */
export function withinLimit<T>(call: string, join: () => Joined<T>, limit: WaitLimit): Promise<T> {
  const { signal, timeoutMs } = limit;
  if (isAborted(signal)) return Promise.reject(waitStopped(call, limit, false));
  const joined = join();
  if (signal === undefined && timeoutMs === undefined) return joined.promise;
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => stop(false);
    const finish = () => {
      if (timer !== undefined) clearTimeout(timer);
      if (signal !== undefined) unlisten.call(signal, "abort", onAbort);
    };
    const stop = (timedOut: boolean) => {
      finish();
      joined.leave();
      reject(waitStopped(call, limit, timedOut));
    };
    if (signal !== undefined) listen.call(signal, "abort", onAbort, { once: true });
    if (timeoutMs !== undefined && timeoutMs <= MAX_TIMER_MS) timer = setTimeout(() => stop(true), timeoutMs);
    joined.promise.then(
      (value) => {
        finish();
        resolve(value);
      },
      (error) => {
        finish();
        reject(error);
      },
    );
  });
}

// `await` (handle.ts) polls the plan on setImmediate (Bun and Deno 2 have it) for a
// short spin window first: most copies finish within it, and the event loop
// keeps running between polls. After the window, Deno waits with
// mtc_plan_wait on one of its FFI threads (no busy CPU), and Bun, which has
// no nonblocking FFI call, polls on setTimeout with a delay doubling up to a
// few milliseconds (bounded lateness).
// Measured on the H100 host for the example batch (1,000 alternating pairs
// of get() and await): await came 0-4 µs from get() in both runtimes. Deno
// going straight to the nonblocking wait cost +129 µs (its thread hops cost
// more than the copy's tail). On the emulated driver (2-core VM, one 1 KiB
// leaf, Bun): await 23-27 µs from startCopy to result, against 81 µs for
// get(), whose mtc_plan_wait sleeps.
const SPIN_MS = 2;
const MAX_DELAY_MS = 4;

const g = globalThis as unknown as { setImmediate?: (fn: () => void) => unknown };
/** A macrotask soon: setImmediate, or a 0 ms timer where a runtime lacks it. */
const soon: (fn: () => void) => void = typeof g.setImmediate === "function"
  ? (fn) => void g.setImmediate!(fn)
  : (fn) => void setTimeout(fn, 0);

/**
 * Runs `step` on macrotasks until it returns true, or until SPIN_MS have
 * passed; then calls `slow` (once), unless `step` is done.
 */
export function spin(step: () => boolean, slow: () => void): void {
  const start = performance.now();
  const tick = () => {
    if (step()) return;
    if (performance.now() - start >= SPIN_MS) slow();
    else soon(tick);
  };
  soon(tick);
}

/** Runs `step` on timers, with a delay doubling up to MAX_DELAY_MS, until it returns true. */
export function pollUntil(step: () => boolean): void {
  let delay = 1;
  const poll = () => {
    if (step()) return;
    setTimeout(poll, delay);
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  };
  poll();
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Blocks the thread until `ready()` is true, or throws {@link waitStopped}
 * when the limit comes first. The signal is read as the wait starts and
 * between sleeps (a blocked thread runs no event, so only a signal that
 * had aborted already can stop it); the time is checked between sleeps of
 * up to 1 ms. Nothing of the caller's runs inside.
 */
export function blockWithinLimit(call: string, ready: () => boolean, limit: WaitLimit): void {
  const { signal, timeoutMs } = limit;
  if (isAborted(signal)) throw waitStopped(call, limit, false);
  if (timeoutMs === undefined) return; // no time limit: the plain blocking wait
  const deadline = performance.now() + timeoutMs;
  let sleepMs = 0.05;
  while (!ready()) {
    if (isAborted(signal)) throw waitStopped(call, limit, false);
    const left = deadline - performance.now();
    if (left <= 0) throw waitStopped(call, limit, true);
    Atomics.wait(sleeper, 0, 0, Math.min(left, sleepMs));
    sleepMs = Math.min(sleepMs * 2, 1);
  }
}
