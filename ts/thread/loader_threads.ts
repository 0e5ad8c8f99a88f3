/**
 * The threads of a loader (ts/thread/loader.ts): how they are made, what
 * the loader says when one ended on its own, and how they are stopped.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { unrefTimer } from "../base/runtime.ts";
import { dropMovedFrom, ownerAlive } from "./move.ts";
import type { FromWorker, ToWorker } from "./loader_protocol.ts";

/** How long close() waits for the workers' threads to end before it terminates them. */
export const THREAD_END_WAIT_MS = 1000;

/**
 * While a next() waits, how often the loader looks whether a worker's
 * thread ended on its own (a producer that called close() or
 * process.exit()): its owner in C ends with the thread. Seen ended twice in
 * a row before its missing batch is given up, so that messages it posted
 * just before have arrived.
 */
export const WATCH_MS = 20;

/** The little of a Worker the loader uses (both runtimes have web Workers). */
export interface LoaderWorker {
  onmessage: ((event: { data: FromWorker }) => void) | null;
  onerror: ((event: { message?: string; preventDefault?(): void }) => void) | null;
  onmessageerror: ((event: unknown) => void) | null;
  postMessage(message: ToWorker): void;
  terminate(): void;
}
/** A Worker's options: Bun's take the worker's environment too. */
export interface WorkerOptions {
  type: "module";
  env?: Record<string, string>;
}
const WorkerClass = (globalThis as unknown as { Worker: new (url: URL, options: WorkerOptions) => LoaderWorker }).Worker;

/** A new worker thread running `script`. */
export function newWorker(script: URL, options: WorkerOptions = { type: "module" }): LoaderWorker {
  return new WorkerClass(script, options);
}

/** The error at batch `index`'s turn when worker `worker`'s thread ended on its own before it sent it. */
export function threadEndedError(worker: number, index: number): MtcError {
  return new MtcError(
    Status.MTC_ERR_INVALID_STATE,
    `startLoader: loader worker ${worker} ended before it sent batch ${index}: its thread was ended from inside ` +
      "(close(), self.close(), process.exit() or Deno.exit() in the producer's module?)",
  );
}

/**
 * The error at batch `index`'s turn when worker `worker` failed and could
 * not say so itself: its thread's error event (`message`: under `bun test`
 * its workers' uncaught errors come only so, as the error printed with its
 * source lines).
 */
export function workerFailedError(worker: number, index: number, message: string): MtcError {
  // Bun's form: source lines ("12 | code"), a caret line, the error, its stack. The error is what says something.
  const lines = message.split("\n").map((line) => line.trim()).filter((line) => line !== "" && !/^\d+ \|/.test(line) && !/^\^+$/.test(line) && !line.startsWith("at "));
  return new MtcError(Status.MTC_ERR_INVALID_STATE, `startLoader: loader worker ${worker} failed before batch ${index}: ${lines.join(" ") || "an uncaught error"}`);
}

/**
 * Ends the workers and drops the parcels they sent that nobody took
 * (messages lost with them). A worker asked to stop ends its thread
 * between two steps, and its owner ends with it: from then on it sends
 * nothing, and what it sent can be dropped. One that does not end within
 * THREAD_END_WAIT_MS (a producer busy for long) is terminated, and its
 * parcels are dropped, on a timer that does not keep the process alive,
 * once its thread ended. A worker that never said its owner got no credit
 * and sent nothing: it is terminated at once.
 */
export async function stopWorkers(workers: LoaderWorker[], owners: (number | undefined)[]): Promise<void> {
  const running: { thread: LoaderWorker; owner: number }[] = [];
  workers.forEach((thread, i) => {
    const owner = owners[i];
    if (owner === undefined) {
      thread.terminate();
    } else {
      thread.postMessage({ kind: "stop" });
      running.push({ thread, owner });
    }
  });
  const started = performance.now();
  let alive = dropEnded(running);
  for (let pause = 1; alive.length > 0 && performance.now() - started < THREAD_END_WAIT_MS; pause = Math.min(2 * pause, 20)) {
    await new Promise((resolve) => setTimeout(resolve, pause));
    alive = dropEnded(alive);
  }
  for (const { thread } of running) thread.terminate();
  if (alive.length > 0) watchOwners(alive);
}

function watchOwners(workers: { owner: number }[]): void {
  unrefTimer(setTimeout(() => {
    const alive = dropEnded(workers);
    if (alive.length > 0) watchOwners(alive);
  }, 100));
}

/** Drops what each ended owner left in transit; returns the workers whose owner is still alive. */
function dropEnded<W extends { owner: number }>(workers: W[]): W[] {
  return workers.filter(({ owner }) => {
    if (ownerAlive(owner)) return true;
    dropMovedFrom(owner);
    return false;
  });
}

/** The error a worker moved (or its batch's take threw), with which worker and batch it came from under its own stack. */
export function fromWorker(error: unknown, index: number, worker: number): unknown {
  if (error instanceof Error) error.stack = `${error.stack ?? `${error.name}: ${error.message}`}\n    at batch ${index} in loader worker ${worker}`;
  return error;
}
