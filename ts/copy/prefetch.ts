/**
 * prefetch: copy the batches of a (sync or async) iterable to a device
 * ahead of their use, a bounded number at a time.
 *
 * @module
 */

import { AsyncCopyHandle, type Copied, startCopy } from "./start_copy.ts";
import type { Device } from "../gpu/device.ts";
import { disposeAll } from "../tensor/dispose.ts";
import { checkOptionNames, invalidArgument, showValue } from "../base/errors.ts";
import { COPY_OPTION_NAMES, type CopyOptions, resolveOptions } from "./options.ts";
import { Stream, withStream } from "../gpu/stream.ts";
import { abortReason, type AbortSignalLike, isAborted, readSignal } from "./wait_limit.ts";

const PREFETCH_OPTIONS: readonly string[] = [...COPY_OPTION_NAMES, "depth", "stream", "signal"];

/** Options of {@link prefetch}: how far ahead, and the copies' own options. */
export interface PrefetchOptions extends CopyOptions {
  /**
   * Most copies in flight (started and not yet handed out), an integer
   * >= 1. Default 2: while the consumer works on batch k, batches k+1 and
   * k+2 are being copied.
   */
  depth?: number;
  /**
   * A stream every copy is ordered against, as if each started inside
   * `withStream(stream, ...)`: for a stream of the target device, the
   * stream waits for each copy. Without it, each copy uses the current
   * streams when it starts (which is when the consumer asks for a batch).
   */
  stream?: Stream;
  /**
   * Stops the loop when it aborts: the `next()` waiting for a copy (or
   * called after the abort) rejects with the signal's reason, as fetch
   * does, and, as when the consumer stops early, every copy not handed out
   * is disposed (after its copy is over: memory a copy uses is never freed
   * under it) and the source iterator is closed.
   */
  signal?: AbortSignalLike;
}

/**
 * Copies each batch of `batches` to `device` ahead of its use and yields
 * the copies in order. Up to `depth` copies are in flight at a time, so the
 * copy of the next batches overlaps the consumer's work on the current one;
 * the source is read only as far ahead as that.
 *
 * Each yielded batch belongs to the consumer (dispose its DeviceTensors, or
 * release its pinned host outputs, when done: `disposeAll`). When the
 * consumer stops early (`break`, `return`, a throw in the loop body) or a
 * copy fails, every copy not yet handed out is disposed with its outputs,
 * and the source iterator is closed (`return()`). A batch whose copy fails
 * (a bad leaf, a device error) ends the loop with that MtcError when its
 * turn comes: the batches before it are yielded first. Bad `options` (not
 * an object, an unknown name, a value out of range) throw MtcError on the
 * first `next()`.
 *
 * @example
 * ```ts
 * for await (const batch of prefetch(loader(), "cuda:0", { depth: 2 })) {
 *   train(batch);
 *   disposeAll(batch);
 * }
 * ```
 */
export async function* prefetch<T, D extends Device>(
  batches: Iterable<T> | AsyncIterable<T>,
  device: D,
  options: PrefetchOptions = {},
): AsyncGenerator<Copied<T, D>, void, undefined> {
  checkOptionNames(options, PREFETCH_OPTIONS, "prefetch: ");
  const { depth = 2, stream, signal: given, ...copyOptions } = options;
  const signal = readSignal("prefetch", given);
  if (!Number.isSafeInteger(depth) || depth < 1) throw invalidArgument(`prefetch: depth = ${showValue(depth)} must be an integer >= 1`);
  if (stream !== undefined && !(stream instanceof Stream)) throw invalidArgument("prefetch: stream must be a Stream");
  resolveOptions(copyOptions); // bad options fail before the source is read
  const iterator: Iterator<T> | AsyncIterator<T> = Symbol.asyncIterator in batches
    ? (batches as AsyncIterable<T>)[Symbol.asyncIterator]()
    : (batches as Iterable<T>)[Symbol.iterator]();
  const start = (batch: T): AsyncCopyHandle<Copied<T, D>> =>
    stream === undefined
      ? startCopy(batch, device, copyOptions)
      : withStream(stream, () => startCopy(batch, device, copyOptions));
  // Copies in flight, in order; a batch whose copy could not start holds
  // its error instead, thrown when its turn comes (earlier batches first).
  const queue: (AsyncCopyHandle<Copied<T, D>> | { error: unknown })[] = [];
  let exhausted = false;
  const fill = async () => {
    while (!exhausted && queue.length < depth) {
      if (isAborted(signal)) throw abortReason(signal!);
      const next = await iterator.next();
      if (next.done) {
        exhausted = true;
        break;
      }
      try {
        queue.push(start(next.value));
      } catch (error) {
        queue.push({ error });
        exhausted = true; // read no further: the loop ends at this batch
        await iterator.return?.();
      }
    }
  };
  try {
    await fill();
    while (queue.length > 0) {
      const head = queue[0]!;
      if (!(head instanceof AsyncCopyHandle)) throw head.error;
      let batch: Copied<T, D>;
      try {
        batch = await head.wait({ signal }); // an abort rejects it with the signal's reason
      } finally {
        queue.shift();
        head.dispose(); // the outputs, once handed out, live on
      }
      try {
        await fill(); // the next copies run while the consumer works on this batch
      } catch (e) {
        disposeAll(batch);
        throw e;
      }
      yield batch;
    }
  } finally {
    for (const entry of queue) if (entry instanceof AsyncCopyHandle) entry.dispose();
    queue.length = 0;
    if (!exhausted) await iterator.return?.();
  }
}
