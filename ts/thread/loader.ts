/**
 * startLoader: batches made and copied to a device by worker threads,
 * handed to the consumer in order on its own thread, a bounded number
 * ahead.
 *
 * @module
 */

import { COPY_OPTION_NAMES, type CopyOptions, resolveOptions } from "../copy/options.ts";
import { abortReason, type AbortSignalLike, readSignal } from "../copy/wait_limit.ts";
import { type Device, parseDevice } from "../gpu/device.ts";
import { checkOptionNames, invalidArgument, MtcError, showValue, Status } from "../base/errors.ts";
import { counted, defineInspect } from "../base/inspect.ts";
import { dropMoved, type Moved, movedError, ownerAlive, takeResult } from "./move.ts";
import type { FromWorker, StartMessage } from "./loader_protocol.ts";
import { LoaderCounters, type LoaderStats } from "./loader_stats.ts";
import { takeWaits } from "./parcel_take.ts";
import { fromWorker, type LoaderWorker, stopWorkers, threadEndedError, WATCH_MS, workerFailedError } from "./loader_threads.ts";
import { loaderFiles, newLoaderThread } from "./worker_script.ts";

/** Options of {@link startLoader}. */
export interface LoaderOptions {
  /**
   * The URL of the module that makes the batches (absolute: `file:`, or
   * `https:` in Deno), imported by every worker, e.g.
   * `new URL("./batches.ts", import.meta.url)`.
   */
  module: string | { readonly href: string };
  /**
   * The name of its export that makes batch `index` (default "default"):
   * `(index, { worker, workers, args }) => batch | undefined | Promise<...>`.
   * Returning undefined or null ends the stream before that batch.
   */
  export?: string;
  /** Where the batches go, e.g. "cuda:0". */
  device: Device;
  /** Worker threads, an integer >= 1 (default 2). Batch i is made by worker i % workers. */
  workers?: number;
  /**
   * Batches each worker may have made and not yet handed to the consumer,
   * an integer >= 1 (default 2): at most workers * depth are on the device
   * ahead of the consumer.
   */
  depth?: number;
  /** How many batches in all, an integer >= 0 (default: until a producer returns undefined or null). */
  batches?: number;
  /** Given to every producer call as `context.args`; anything postMessage can clone. */
  args?: unknown;
  /** Options of the workers' copies (startCopy). useBackgroundThread defaults to false there, and copyHostLeaves to true in a copy to "cpu" (an arena's leaves cannot move). */
  copyOptions?: CopyOptions;
  /** Stops the loader: a next() waiting (or the next one) rejects with the signal's reason. */
  signal?: AbortSignalLike;
}

/** What a producer is given besides the batch's index. */
export interface LoaderContext {
  /** This worker's number, 0 .. workers - 1. */
  readonly worker: number;
  /** LoaderOptions.workers. */
  readonly workers: number;
  /** LoaderOptions.args, as cloned into this worker. */
  readonly args: unknown;
}

const NAMES: readonly string[] = ["module", "export", "device", "workers", "depth", "batches", "args", "copyOptions", "signal"];

/** Only this module holds it: a Loader is made by startLoader, whose checks its constructor relies on. */
const MADE_HERE = Symbol("made by startLoader");

/** startLoader's way to the private constructor. */
let makeLoader: <T>(start: Omit<StartMessage, "worker">, workers: number, depth: number, signal: AbortSignalLike | undefined) => Loader<T>;

interface Waiter<T> {
  resolve(result: IteratorResult<T, undefined>): void;
  reject(error: unknown): void;
  /** When next() was called (performance.now()). */
  since: number;
}

const DONE: IteratorResult<never, undefined> = Object.freeze({ done: true, value: undefined });

/**
 * Starts `workers` worker threads that each import `options.module`, make
 * batches with its producer, copy each to `options.device` (startCopy) and
 * move the result to this thread. Iterate the loader to take the batches in
 * index order; each one belongs to the consumer from then on (dispose it:
 * `disposeAll`). Each worker runs at most `depth` batches ahead of the
 * consumer. Bad options throw MtcError here.
 *
 * A producer's error, or a copy's (an MtcError naming the leaf), ends the
 * stream when that batch's turn comes: the batches before it are handed
 * out first, then next() rejects with it (its stack the worker's) and the
 * loader closes. `break`, `close()`, `await using` and the signal stop the
 * workers and release every batch made and not handed out.
 *
 * @example
 * ```ts
 * await using loader = startLoader<Batch>({
 *   module: new URL("./batches.ts", import.meta.url),
 *   device: "cuda:0",
 *   workers: 4,
 * });
 * for await (const batch of loader) {
 *   train(batch);
 *   disposeAll(batch);
 * }
 * ```
 */
export function startLoader<T = unknown>(options: LoaderOptions): Loader<T> {
  checkOptionNames(options, NAMES, "startLoader: ");
  if (options === undefined) throw invalidArgument("startLoader: options must be an object with module and device");
  const { module, export: name = "default", device, workers = 2, depth = 2, batches, args, copyOptions: given = {}, signal } = options;
  // Read once: what is checked is what the workers get.
  const copyOptions: CopyOptions = typeof given === "object" && given !== null ? { ...given } : given;
  const url = typeof module === "string" ? module : typeof module === "object" && module !== null ? module.href : undefined;
  if (typeof url !== "string" || !URL.canParse(url)) {
    throw invalidArgument(`startLoader: module must be an absolute URL (a string or URL, e.g. new URL("./batches.ts", import.meta.url)), got ${showValue(module)}`);
  }
  if (typeof name !== "string") throw invalidArgument(`startLoader: export must be a string, got ${showValue(name)}`);
  parseDevice(device, "startLoader: ");
  for (const [key, value, min] of [["workers", workers, 1], ["depth", depth, 1], ["batches", batches ?? 0, 0]] as const) {
    if (!Number.isSafeInteger(value) || value < min) throw invalidArgument(`startLoader: ${key} = ${showValue(value)} must be an integer >= ${min}`);
  }
  checkOptionNames(copyOptions, COPY_OPTION_NAMES, "startLoader: copyOptions: ");
  resolveOptions(copyOptions);
  readSignal("startLoader", signal);
  const start: Omit<StartMessage, "worker"> = {
    kind: "start",
    module: loaderFiles(url).module,
    export: name,
    workers,
    batches: batches ?? null,
    device,
    copyOptions,
    args,
  };
  // Workers with no batch to make are not started.
  const started = batches === undefined ? workers : Math.min(workers, batches);
  return makeLoader<T>(start, started, depth, signal);
}

/**
 * Batches made by worker threads, in index order: an async iterator
 * (`for await`), closed by `break`, `close()`, `await using` or its signal.
 * Made by {@link startLoader}.
 */
export class Loader<T> implements AsyncIterableIterator<T, undefined>, AsyncDisposable {
  readonly #workers: LoaderWorker[] = [];
  /** Each worker's owner, once it said. */
  readonly #owners: (number | undefined)[] = [];
  readonly #depth: number;
  /** Batches received and not yet handed out, by index. */
  readonly #arrived = new Map<number, Moved>();
  /** The index of the next batch to hand out. */
  #next = 0;
  /** The stream ends before this index. */
  #end: number;
  readonly #waiters: Waiter<T>[] = [];
  /** Per worker: the error its thread's error event said it failed with. */
  readonly #failed: (((index: number) => MtcError) | undefined)[] = [];
  /** Per worker: seen ended or failed once by #watch, while the stream needed it. */
  readonly #seenEnded: boolean[] = [];
  /** The timer of #watch, while a next() waits. */
  #watchTimer: ReturnType<typeof setTimeout> | null = null;
  /** What the next next() rejects with (a worker that failed, the signal). */
  #failure: { error: unknown } | null = null;
  #closed = false;
  #closing: Promise<void> | null = null;
  readonly #signal: AbortSignalLike | undefined;
  readonly #counters: LoaderCounters;
  // The signal's reason, as fetch rejects and as a handle's wait and prefetch do (ts/copy/wait_limit.ts).
  readonly #onAbort = (): void => this.#fail(abortReason(this.#signal!));

  /** Made by {@link startLoader}: `new Loader()` throws MtcError. */
  private constructor(made: symbol, start: Omit<StartMessage, "worker">, workers: number, depth: number, signal: AbortSignalLike | undefined) {
    if (made !== MADE_HERE) throw invalidArgument("new Loader(): a Loader is made by startLoader");
    this.#depth = depth;
    this.#counters = new LoaderCounters(workers);
    this.#end = start.batches ?? Infinity;
    this.#signal = signal;
    if (signal?.aborted === true) {
      this.#onAbort();
      return;
    }
    signal?.addEventListener("abort", this.#onAbort, { once: true });
    try {
      for (let worker = 0; worker < workers; worker++) this.#startWorker(worker, { ...start, worker });
    } catch (error) {
      void this.#shutdown();
      throw error;
    }
  }

  static {
    makeLoader = (start, workers, depth, signal) => new Loader(MADE_HERE, start, workers, depth, signal);
    defineInspect<Loader<unknown>>(this.prototype, "Loader", (l) => (#workers in l ? l.#show() : "Loader (not made by this library)"));
  }

  /** What console.log shows: "Loader(4 workers, next batch 3 of 10, 2 ready)". */
  #show(): string {
    const workers = counted(this.#workers.length, "worker", "workers");
    if (this.#closed) return `Loader(${workers}, closed)`;
    if (this.#failure !== null) return `Loader(${workers}, failed)`;
    const of = Number.isFinite(this.#end) ? ` of ${this.#end}` : "";
    return `Loader(${workers}, next batch ${this.#next}${of}, ${this.#arrived.size} ready)`;
  }

  #startWorker(worker: number, start: StartMessage): void {
    const thread = newLoaderThread();
    this.#workers.push(thread);
    thread.onmessage = (event) => this.#receive(worker, event.data);
    // A worker reports its own failures as batch errors; its error event
    // comes when it could not (under `bun test`, its uncaught errors come
    // only there, and the worker ends): the batch of its that a next() then
    // waits for gets the error.
    thread.onerror = (event) => {
      event.preventDefault?.(); // the loader reports it; the process goes on
      const message = typeof event.message === "string" ? event.message : "";
      this.#failed[worker] ??= (index) => workerFailedError(worker, index, message); // #watch gives it out
    };
    thread.onmessageerror = () => this.#fail(new MtcError(Status.MTC_ERR_INTERNAL, `startLoader: a message of worker ${worker} could not be read`));
    try {
      thread.postMessage(start);
    } catch (cause) {
      const why = cause instanceof Error ? cause.message : String(cause);
      throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `startLoader: cannot send the options to a worker (args must be what postMessage can clone): ${why}`, { cause });
    }
  }

  #receive(worker: number, message: FromWorker): void {
    if (message.kind === "owner") {
      this.#owners[worker] = message.owner;
      // Its first credits: from now on, whatever it sends can be dropped by its owner.
      if (!this.#closed) this.#credit(worker, this.#depth);
      return;
    }
    if (message.kind === "end") {
      this.#end = Math.min(this.#end, message.index);
      for (const [index, moved] of this.#arrived) {
        if (index >= this.#end) {
          this.#arrived.delete(index);
          dropMoved(moved);
        }
      }
    } else if (this.#closed || message.index >= this.#end) {
      dropMoved(message.moved);
      return;
    } else {
      this.#counters.batch(worker, message.times, message.made !== false);
      this.#arrived.set(message.index, message.moved);
    }
    this.#settle();
  }

  /** Answers the waiting next() calls, in order, with what is there. */
  #settle(): void {
    while (this.#waiters.length > 0) {
      const waiter = this.#waiters[0]!;
      if (this.#failure !== null) {
        const { error } = this.#failure;
        this.#failure = null;
        this.#waiters.shift();
        waiter.reject(error);
        void this.#shutdown();
      } else if (this.#closed || this.#next >= this.#end) {
        this.#waiters.shift();
        waiter.resolve(DONE);
        void this.#shutdown();
      } else {
        const index = this.#next;
        const moved = this.#arrived.get(index);
        if (moved === undefined) return this.#watch();
        this.#arrived.delete(index);
        this.#next++;
        this.#waiters.shift();
        this.#take(index, moved, waiter);
      }
    }
    // Nobody waits. A watch timer is left to find that when it fires: one per batch cost more than the rest.
  }

  #take(index: number, moved: Moved, waiter: Waiter<T>): void {
    const worker = index % this.#workers.length;
    const counters = this.#counters;
    const began = performance.now();
    counters.consumerWaitMs += began - waiter.since;
    const copyWait = takeWaits.ms;
    let value: unknown;
    try {
      value = takeResult(moved); // a copy still running is waited for here (parcel_take.ts)
      if (movedError(moved)) throw fromWorker(value, index, worker);
    } catch (error) {
      // A copy that failed: its leaf's path, and which batch and worker.
      this.#failure = { error: movedError(moved) ? error : fromWorker(error, index, worker) };
      this.#waiters.unshift(waiter); // #settle rejects it, and the loader closes
      return;
    } finally {
      counters.copyWaitMs += takeWaits.ms - copyWait;
      counters.takeMs += performance.now() - began;
    }
    counters.taken++;
    this.#credit(worker, 1);
    waiter.resolve({ done: false, value: value as T });
  }

  #credit(worker: number, count: number): void {
    this.#counters.granted[worker]! += count;
    this.#workers[worker]!.postMessage(count);
  }

  /** Batches made, taken, in flight, waiting; each worker's make and copy time; the consumer's wait and take time (loader_stats.ts). */
  get stats(): LoaderStats {
    return this.#counters.snapshot(this.#arrived.size, this.#closed ? 0 : this.#end - this.#next);
  }

  /**
   * While a next() waits: looks every WATCH_MS whether the thread of the
   * worker that makes the batch it waits for ended on its own (a producer
   * that called close() or process.exit()): that batch will never come, and
   * the stream ends there. The timer holds the process, as the waiting
   * next() does, and at most WATCH_MS past the last wait.
   */
  #watch(): void {
    if (this.#watchTimer !== null || this.#closed) return;
    this.#watchTimer = setTimeout(() => {
      this.#watchTimer = null;
      if (this.#closed || this.#waiters.length === 0) return;
      const worker = this.#next % this.#workers.length;
      const owner = this.#owners[worker]; // none yet, and no error: it has made nothing, and is waited for
      const failed = this.#failed[worker];
      if (failed !== undefined || (owner !== undefined && !ownerAlive(owner))) {
        // Seen twice, WATCH_MS apart: what it posted before it ended has arrived.
        if (this.#seenEnded[worker] === true) this.#failure = { error: (failed ?? ((index) => threadEndedError(worker, index)))(this.#next) };
        this.#seenEnded[worker] = true;
      }
      this.#settle();
    }, WATCH_MS);
  }

  #unwatch(): void {
    if (this.#watchTimer !== null) clearTimeout(this.#watchTimer);
    this.#watchTimer = null;
  }

  /** Ends the stream with `error`, given to the next next(); stops the workers. */
  #fail(error: unknown): void {
    if (this.#closed) return;
    this.#failure = { error };
    void this.#shutdown();
  }

  /** The next batch, in index order; `{ done: true }` once the stream ended or the loader closed. */
  next(): Promise<IteratorResult<T, undefined>> {
    return new Promise((resolve, reject) => {
      this.#waiters.push({ resolve, reject, since: performance.now() });
      this.#settle();
    });
  }

  /** Closes the loader (what `break` calls). */
  async return(): Promise<IteratorResult<T, undefined>> {
    await this.close();
    return DONE;
  }

  /**
   * Stops the workers and releases every batch made and not handed out,
   * those still in messages or in a copy included; a waiting next() ends
   * with `{ done: true }`. Batches handed out stay the consumer's.
   * Resolves once the workers' threads ended (or after a second, when one
   * is still busy: it is terminated then, and what it made is released
   * when its thread ends). Idempotent.
   */
  close(): Promise<void> {
    this.#failure = null;
    return this.#shutdown();
  }

  /** The loader itself: it is its own iterator (`for await`), and can be iterated once. */
  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Same as close(), for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #shutdown(): Promise<void> {
    if (this.#closing !== null) return this.#closing;
    this.#closed = true;
    this.#unwatch();
    this.#signal?.removeEventListener("abort", this.#onAbort);
    for (const moved of this.#arrived.values()) dropMoved(moved);
    this.#arrived.clear();
    this.#closing = stopWorkers(this.#workers, this.#owners);
    this.#settle();
    return this.#closing;
  }
}
