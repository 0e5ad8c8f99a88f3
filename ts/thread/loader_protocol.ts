/**
 * The messages between a loader (ts/thread/loader.ts, on the consumer's
 * thread) and its workers (ts/thread/loader_worker.ts). Every message is
 * plain data, cloned by postMessage.
 *
 * @module
 */

import type { CopyOptions } from "../copy/options.ts";
import type { Moved } from "./move.ts";

/** What a worker needs to produce its batches: posted once, when it is made. */
export interface StartMessage {
  readonly kind: "start";
  /** The producer module's URL, and the name of its export. */
  readonly module: string;
  readonly export: string;
  /** This worker's number: it produces batches worker, worker + workers, ... */
  readonly worker: number;
  readonly workers: number;
  /** Batches in all, or null: until a producer returns undefined or null. */
  readonly batches: number | null;
  readonly device: string;
  readonly copyOptions: CopyOptions;
  readonly args: unknown;
}

/**
 * Leave to produce this many more batches: a bare number, the message sent
 * for every batch taken (an object costs Deno's postMessage five times as
 * much). The first credits (the depth) come once the loader knows the
 * worker's owner, so that every parcel a worker sends can be dropped by
 * that owner if its message is lost; one more comes each time the consumer
 * takes one of its batches.
 */
export type CreditMessage = number;

/**
 * Stop: the worker ends its thread at once (`close()`). It reads this
 * between two of its own steps, never inside a copy or a move, so nothing
 * of the library's is left half done; the loader terminates a worker that
 * does not end soon (a producer busy for long).
 */
export interface StopMessage {
  readonly kind: "stop";
}

/** From the loader to a worker. */
export type ToWorker = StartMessage | CreditMessage | StopMessage;

/** From a worker to the loader. */
export type FromWorker =
  /** The worker's owner: first, before anything else. */
  | { readonly kind: "owner"; readonly owner: number }
  /**
   * Batch `index` on the device (its copy may still run: the loader's take
   * waits for it), or the error that batch (and the stream) ended with; the
   * milliseconds the worker spent on it (stats): making it, starting its
   * copy, moving it, waiting for its credit, and posting the batch before.
   * `made: false`: the error says the producer could not be loaded (its
   * module, or its export), and no batch was made.
   */
  | { readonly kind: "batch"; readonly index: number; readonly moved: Moved; readonly times?: readonly number[]; readonly made?: false }
  /** The producer returned undefined or null for batch `index`: the stream ends before it. */
  | { readonly kind: "end"; readonly index: number };
