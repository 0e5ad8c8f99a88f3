/**
 * A worker of startLoader (ts/thread/loader.ts): imports the producer
 * module, and for each of its batches (worker, worker + workers, ...) makes
 * it, copies it to the device and moves the result to the loader, at most
 * as many ahead as the loader's credits allow.
 *
 * Whatever goes wrong ends the stream at a batch's turn with an Error: a
 * producer's throw (an Error as it is, anything else described in an
 * MtcError), a batch postMessage cannot send (the path of the value), an
 * uncaught error or unhandled rejection outside the producer's call (this
 * worker then ends). A thread ended by the producer itself is seen by the
 * loader (its owner ends).
 *
 * @module
 */

import type { AsyncCopyHandle } from "../copy/handle.ts";
import type { CopyOptions } from "../copy/options.ts";
import { prepareCopy, type PreparedCopy } from "../copy/prepared.ts";
import { startCopy } from "../copy/start_copy.ts";
import { DEVICE_CPU, type Device, parseDevice } from "../gpu/device.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { runtime } from "../base/runtime.ts";
import { type Moved, movedError, moveResult, threadOwner } from "./move.ts";
import { describeValue, producerError, unsendableError, unsentError, workerFailure } from "./loader_errors.ts";
import type { FromWorker, StartMessage, ToWorker } from "./loader_protocol.ts";

type Producer = (index: number, context: { worker: number; workers: number; args: unknown }) => unknown;

interface FailureEvent {
  readonly error?: unknown;
  readonly reason?: unknown;
  preventDefault(): void;
}

const scope = globalThis as unknown as {
  onmessage: ((event: { data: ToWorker }) => void) | null;
  postMessage(message: FromWorker): void;
  /** A web worker's own end; Bun's workers have none. */
  close?(): void;
  addEventListener(type: "error" | "unhandledrejection", listener: (event: FailureEvent) => void): void;
};
const nodeProcess = (globalThis as unknown as {
  process?: { exit(code: number): void; on(event: "uncaughtException" | "unhandledRejection", listener: (reason: unknown) => void): void };
}).process;

let credits = 0;
/** How long the last postMessage of a batch took (sent with the next one). */
let lastPostMs = 0;
/**
 * This worker's prepared copy: the layout of its first batch, made anew
 * from a batch of another structure. Its copies move to the loader while
 * they run, one parcel each (parcel_out.ts).
 */
let prepared: PreparedCopy | null = null;
/** Batches the prepared copy served after its first; batches left to copy plainly before preparing again. */
let served = 0;
let plainFor = 0;
/** Batches copied plainly after a layout that served one batch only. */
const PLAIN_RUN = 16;
let wake: (() => void) | null = null;
/**
 * This worker's number and the batch it makes now (or next): where a
 * failure outside the producer's call ends the stream. Null before the
 * start and once it sent its last message (its last batch, an error, the
 * end): a failure then ends the thread and says nothing.
 */
let making: { worker: number; index: number } | null = null;

scope.onmessage = ({ data }) => {
  if (typeof data === "number") {
    credits += data;
    wake?.();
  } else if (data.kind === "start") {
    void produceAll(data);
  } else {
    endThread(); // between two steps: C gives back what this thread held as it ends
  }
};

// Code of the producer module's that fails outside the producer's call (a
// timer, a promise nobody awaited) ends this worker, and the stream at the
// batch it was making: said here, before the runtime ends the worker
// silently (Bun) or prints the error (Deno). Set before the library's own
// listeners, which then see the event handled and leave its copies be.
if (runtime === "bun") {
  nodeProcess?.on("uncaughtException", (error) => failed(error, "an uncaught error"));
  nodeProcess?.on("unhandledRejection", (reason) => failed(reason, "an unhandled rejection"));
} else {
  scope.addEventListener("error", (event) => {
    event.preventDefault();
    failed(event.error, "an uncaught error");
  });
  scope.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    failed(event.reason, "an unhandled rejection");
  });
}

// First of all: the loader gives credits only once it knows the owner.
scope.postMessage({ kind: "owner", owner: threadOwner() });

/**
 * Ends this thread; C gives back what it held as it ends. A web worker
 * closes itself; a Bun worker has no close(), and process.exit() there ends
 * the worker only.
 */
function endThread(): void {
  if (typeof scope.close === "function") scope.close();
  else nodeProcess?.exit(0);
}

/** An error thrown outside the producer's call: the stream ends at the batch being made, and so does this worker. */
function failed(reason: unknown, uncaught: "an uncaught error" | "an unhandled rejection"): void {
  if (making !== null) {
    const { worker, index } = making;
    making = null;
    post(index, sendableError(workerFailure(reason, uncaught, worker, index), index), null);
  }
  endThread();
}

/** Waits for a credit and takes it. */
async function takeCredit(): Promise<void> {
  while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
  wake = null;
  credits--;
}

async function produceAll(start: StartMessage): Promise<void> {
  const { worker, workers, batches, args } = start;
  const device = start.device as Device;
  // Each worker stages its copies on its own thread (and a terminated
  // worker's memory is never read after it is gone).
  const options: CopyOptions = { ...start.copyOptions };
  options.useBackgroundThread ??= false;
  const toCpu = parseDevice(device) === DEVICE_CPU;
  // A copy to "cpu" hands back the batch's own leaves, and an arena's or a
  // pinned tensor's memory cannot move: the result gets leaves of its own,
  // which move (docs/LOADER.md, "To the CPU").
  if (toCpu) options.copyHostLeaves ??= true;
  // Prepared copies go to a device, and take every option but these.
  const prepares = !toCpu && options.strict !== true && options.copyHostLeaves !== true;
  making = { worker, index: worker };
  let produce: Producer | undefined;
  let failure: unknown;
  try {
    produce = await loadProducer(start.module, start.export);
  } catch (error) {
    failure = error;
  }
  for (let index = worker; batches === null || index < batches; index += workers) {
    making = { worker, index };
    const asked = performance.now();
    await takeCredit();
    let batch: unknown = null;
    let moved: Moved;
    // Where this batch's time goes (Loader.stats): waiting for a credit, making, starting the copy, moving it.
    const times = [0, 0, 0, 0, lastPostMs];
    let at = performance.now();
    times[3] = at - asked;
    try {
      if (produce === undefined) throw failure;
      batch = await produce(index, { worker, workers, args });
      times[0] = -at + (at = performance.now());
      if (batch === undefined || batch === null) {
        making = null;
        scope.postMessage({ kind: "end", index });
        return;
      }
      const handle = prepares ? copyPrepared(batch, device, options) : startCopy(batch, device, options);
      times[1] = -at + (at = performance.now());
      moved = moveResult(handle);
      times[2] = performance.now() - at;
    } catch (thrown) {
      moved = sendableError(producerError(thrown, index), index);
    }
    if (!post(index, moved, batch, times, produce !== undefined)) return;
  }
  making = null; // its last batch is sent
}

/**
 * Starts the copy of `batch` with this worker's prepared copy; a batch of
 * another structure than the layout's (or the first) is prepared anew, and
 * its errors are then prepareCopy's, startCopy's with their paths.
 */
function copyPrepared(batch: unknown, device: Device, options: CopyOptions): AsyncCopyHandle<unknown> {
  if (prepared !== null) {
    try {
      const handle = prepared.start(batch);
      served++;
      return handle;
    } catch {
      prepared.dispose(); // the batch differs from the layout (or is wrong: said below)
      prepared = null;
      // Layouts that last one batch each (shapes that change every time): preparing costs more than it saves.
      plainFor = served === 0 ? PLAIN_RUN : 0;
    }
  }
  if (plainFor > 0) {
    plainFor--;
    return startCopy(batch, device, options);
  }
  prepared = prepareCopy(batch, device, options);
  served = 0;
  return prepared.start(batch);
}

/** `error` moved; one that cannot be moved (a getter in it throws, say) is described in an MtcError of ours. */
function sendableError(error: Error, index: number): Moved {
  try {
    return moveResult(error);
  } catch {
    return moveResult(unsentError(error, index));
  }
}

/**
 * Posts batch `index` (or its error); false once the stream ended. A batch
 * postMessage cannot clone becomes its error, naming the value; an error
 * it cannot clone becomes one of ours. `made` false: the error says the
 * producer could not be loaded, and no batch was made (Loader.stats).
 */
function post(index: number, moved: Moved, batch: unknown, times: number[] = [], made = true): boolean {
  const isError = movedError(moved);
  const began = performance.now();
  try {
    scope.postMessage(made ? { kind: "batch", index, moved, times } : { kind: "batch", index, moved, made });
    lastPostMs = performance.now() - began;
  } catch (cause) {
    // Its parcel goes back with this worker's owner: the loader drops what an ended owner sent.
    const error = isError ? unsentError(null, index) : unsendableError(batch, index, cause);
    making = null;
    scope.postMessage({ kind: "batch", index, moved: moveResult(error) });
    return false;
  }
  if (isError) making = null;
  return !isError;
}

async function loadProducer(module: string, name: string): Promise<Producer> {
  let exports: Record<string, unknown>;
  try {
    exports = await import(module);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : describeValue(cause);
    throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `startLoader: cannot import ${module}: ${why}`, { cause });
  }
  const produce = exports[name];
  if (typeof produce !== "function") {
    throw invalidArgument(`startLoader: ${module} has no function export ${JSON.stringify(name)} (its exports: ${Object.keys(exports).join(", ") || "none"})`);
  }
  return produce as Producer;
}
