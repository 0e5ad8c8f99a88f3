/**
 * A worker of startLoader (ts/thread/loader.ts): imports the producer
 * module, and for each of its batches (worker, worker + workers, ...) makes
 * it, copies it to the device and moves the result to the loader, at most
 * as many ahead as the loader's credits allow.
 *
 * @module
 */

import type { CopyOptions } from "../copy/options.ts";
import { startCopy } from "../copy/start_copy.ts";
import type { Device } from "../gpu/device.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { movedError, moveResult, threadOwner } from "./move.ts";
import type { FromWorker, StartMessage, ToWorker } from "./loader_protocol.ts";

type Producer = (index: number, context: { worker: number; workers: number; args: unknown }) => unknown;

const scope = globalThis as unknown as {
  onmessage: ((event: { data: ToWorker }) => void) | null;
  postMessage(message: FromWorker): void;
  close(): void;
};

let credits = 0;
let wake: (() => void) | null = null;

scope.onmessage = ({ data }) => {
  if (data.kind === "start") {
    void produceAll(data);
  } else if (data.kind === "credit") {
    credits += data.count;
    wake?.();
  } else {
    scope.close(); // between two steps: C gives back what this thread held as it ends
  }
};
// First of all: the loader gives credits only once it knows the owner.
scope.postMessage({ kind: "owner", owner: threadOwner() });

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
  let produce: Producer | undefined;
  let failure: unknown;
  try {
    produce = await loadProducer(start.module, start.export);
  } catch (error) {
    failure = error;
  }
  for (let index = worker; batches === null || index < batches; index += workers) {
    await takeCredit();
    let message: FromWorker;
    try {
      if (produce === undefined) throw failure;
      const batch = await produce(index, { worker, workers, args });
      if (batch === undefined || batch === null) {
        scope.postMessage({ kind: "end", index });
        return;
      }
      message = { kind: "batch", index, moved: moveResult(startCopy(batch, device, options)) };
    } catch (error) {
      message = { kind: "batch", index, moved: moveResult(error) };
    }
    scope.postMessage(message);
    if (movedError(message.moved)) return;
  }
}

async function loadProducer(module: string, name: string): Promise<Producer> {
  let exports: Record<string, unknown>;
  try {
    exports = await import(module);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `startLoader: cannot import ${module}: ${why}`, { cause });
  }
  const produce = exports[name];
  if (typeof produce !== "function") {
    throw invalidArgument(`startLoader: ${module} has no function export ${JSON.stringify(name)} (its exports: ${Object.keys(exports).join(", ") || "none"})`);
  }
  return produce as Producer;
}
