/**
 * A wait in progress that `await handle` and `handle.wait()` share
 * (handle.ts): its promise, settled once, and how many callers still want
 * it.
 *
 * @module
 */

/** A wait in progress for `await` and wait(): its outcome and how many callers still want it. */
export interface Waiting<T> {
  readonly promise: Promise<T>;
  callers: number;
  /** Resolves with what `outcome` returns, or rejects with what it throws. */
  settle(outcome: () => T): void;
}

export function newWaiting<T>(): Waiting<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((yes, no) => ((resolve = yes), (reject = no)));
  return {
    promise,
    callers: 0,
    settle(outcome) {
      try {
        resolve(outcome());
      } catch (e) {
        reject(e);
      }
    },
  };
}
