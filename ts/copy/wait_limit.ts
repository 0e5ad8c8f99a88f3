/**
 * Waiting with a limit: `handle.get({ timeoutMs })`, `handle.wait({ signal,
 * timeoutMs })` and prefetch's `signal`. A wait that stops (the signal
 * aborted, the time ran out) is an MtcError with status MTC_IN_PROGRESS:
 * only the wait ends; the copy goes on, because memory a copy still reads
 * or writes must not be freed under it (RELIABILITY.md, rule 2), and the
 * handle stays as it was: it can be awaited, read or disposed as before.
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

/** An option `signal` checked: an AbortSignal or undefined. */
export function readSignal(call: string, signal: unknown): AbortSignalLike | undefined {
  if (signal !== undefined && !(signal instanceof ABORT_SIGNAL)) {
    throw invalidArgument(`${call}: signal must be an AbortSignal, got ${showValue(signal)}`);
  }
  return signal;
}

function readTimeout(call: string, timeoutMs: unknown): number | undefined {
  if (timeoutMs === undefined) return undefined;
  if (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw invalidArgument(`${call}: timeoutMs must be a number >= 0, got ${showValue(timeoutMs)}`);
  }
  return timeoutMs === Infinity ? undefined : timeoutMs;
}

/** The error of a wait that stopped: its signal aborted (with its reason as the cause), or its time ran out. */
export function waitStopped(call: string, limit: WaitLimit, timedOut: boolean): MtcError {
  const why = timedOut ? `timed out after ${limit.timeoutMs} ms` : "was aborted by its signal";
  return new MtcError(
    Status.MTC_IN_PROGRESS,
    `${call}: the wait ${why}; the copy goes on (await, get() or dispose() the handle as before)`,
    timedOut ? undefined : { cause: limit.signal!.reason },
  );
}

/** setTimeout takes at most this many ms; a longer limit is no limit in practice. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * What `settled()` gives, or a rejection with {@link waitStopped} when the
 * limit comes first (at once for a signal that has aborted already, without
 * calling `settled`). The timer and the abort listener go with the first
 * outcome; a later outcome of the promise is handled (never an unhandled
 * rejection), and stays the handle's.
 */
export function withinLimit<T>(call: string, settled: () => Promise<T>, limit: WaitLimit): Promise<T> {
  const { signal, timeoutMs } = limit;
  if (signal?.aborted === true) return Promise.reject(waitStopped(call, limit, false));
  const promise = settled();
  if (signal === undefined && timeoutMs === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => stop(false);
    const finish = () => {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const stop = (timedOut: boolean) => {
      finish();
      reject(waitStopped(call, limit, timedOut));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    if (timeoutMs !== undefined && timeoutMs <= MAX_TIMER_MS) timer = setTimeout(() => stop(true), timeoutMs);
    promise.then(
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

/** True once `signal` has aborted (a function: TypeScript would keep an earlier answer). */
function aborted(signal: AbortSignalLike | undefined): boolean {
  return signal?.aborted === true;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Blocks the thread until `ready()` is true, or throws {@link waitStopped}
 * when the limit comes first. The signal is read as the wait starts and
 * between sleeps (a blocked thread runs no event, so only a signal that
 * another thread aborts, or that had aborted already, can stop it); the
 * time is checked between sleeps of up to 1 ms.
 */
export function blockWithinLimit(call: string, ready: () => boolean, limit: WaitLimit): void {
  const { signal, timeoutMs } = limit;
  if (aborted(signal)) throw waitStopped(call, limit, false);
  if (timeoutMs === undefined) return; // no time limit: the plain blocking wait
  const deadline = performance.now() + timeoutMs;
  let sleepMs = 0.05;
  while (!ready()) {
    if (aborted(signal)) throw waitStopped(call, limit, false);
    const left = deadline - performance.now();
    if (left <= 0) throw waitStopped(call, limit, true);
    Atomics.wait(sleeper, 0, 0, Math.min(left, sleepMs));
    sleepMs = Math.min(sleepMs * 2, 1);
  }
}
