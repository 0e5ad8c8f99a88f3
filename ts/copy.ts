/**
 * startCopy and AsyncCopyHandle: one copy of a whole batch, with a constant
 * number of FFI calls however many leaves it has.
 *
 * @module
 */

import { BlockHolder } from "./block.ts";
import { CURRENT_CUDA, DEVICE_CPU, type Device, parseDevice } from "./device.ts";
import { leafWords, sourceDevices, writeLeaves } from "./descriptors.ts";
import { DeviceTensor } from "./device_tensor.ts";
import { allocateStorage, type DType, dtypeOf, isNaturalDType, type TypedArray } from "./dtype.ts";
import { MtcError, Status, statusName } from "./errors.ts";
import { library, type MtcLibrary, requireSymbol } from "./ffi/library.ts";
import type { NativeSymbols } from "./ffi/symbols.ts";
import { hostLeafView, pinnedBuffer } from "./host_output.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE, resolveOptions } from "./options.ts";
import { decodePlanStats, PLAN_STATS_SIZE, type PlanStats, reusedOnlyStats } from "./plan_stats.ts";
import { CudaEvent, openScopes, type Stream, streamFor } from "./stream.ts";
import { onExit } from "./runtime.ts";
import { Tensor } from "./tensor.ts";
import { type Leaf, leafPath, place, type Traversal, traverse } from "./traverse.ts";

// ------------------------------------------------------------------ types

/** A host leaf as copies to "cpu" give it back: a typed array (1-D, natural dtype) or a Tensor. */
export type HostLeaf = TypedArray | Tensor;

/** Values that pass through a copy as they are (not traversed, not copied). */
export type PassThrough =
  | ((...args: never[]) => unknown)
  | DataView
  | ArrayBuffer
  | Date
  | RegExp
  | ReadonlySet<unknown>
  | Promise<unknown>;

/** The type of `T` copied to a CUDA device: every tensor leaf becomes a DeviceTensor. */
export type OnDevice<T> = T extends TypedArray | Tensor | DeviceTensor ? DeviceTensor
  : T extends PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnDevice<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnDevice<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnDevice<T[K]> }
  : T;

/** The type of `T` copied to the host: DeviceTensors become host leaves, host leaves stay as they are. */
export type OnHost<T> = T extends DeviceTensor ? HostLeaf
  : T extends TypedArray | Tensor | PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnHost<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnHost<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnHost<T[K]> }
  : T;

/**
 * The type of `T` copied to a device known only at run time (`Device`):
 * the same containers, each tensor leaf either where it was or a copy.
 */
export type OnAnyDevice<T> = T extends DeviceTensor ? DeviceTensor | HostLeaf
  : T extends TypedArray | Tensor ? T | DeviceTensor
  : T extends PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnAnyDevice<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnAnyDevice<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnAnyDevice<T[K]> }
  : T;

/**
 * The result type of copying `T` to device `D`: {@link OnHost} for "cpu",
 * {@link OnDevice} for "cuda" and "cuda:N", {@link OnAnyDevice} when `D` is
 * the whole `Device` type (a device chosen at run time). (Types cannot tell
 * class instances from plain objects; at run time only arrays, plain objects
 * and Maps are traversed, and everything else passes through as it is.)
 */
export type Copied<T, D extends Device> = [D] extends ["cpu"] ? OnHost<T>
  : "cpu" extends D ? OnAnyDevice<T>
  : OnDevice<T>;

// --------------------------------------------------------- reused buffers

const RESULT_BYTES = 32; // sizeof(mtc_leaf_result)
const RESULT_REUSED = 1;
const RESULT_PACKED = 2;
const TWO_32 = 4294967296;

// One result buffer for all copies: results are read synchronously.
let resultWords = new Uint32Array((64 * RESULT_BYTES) / 4);
let resultInts = new Int32Array(resultWords.buffer);
const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);
const outWords = new Uint32Array(2); // mtc_plan **, mtc_event **, int32_t * out-parameters
const statsBytes = new Uint8Array(PLAN_STATS_SIZE);
new DataView(statsBytes.buffer).setUint32(0, PLAN_STATS_SIZE, true); // struct_size, kept: C only writes the rest

function capacityFor(count: number): number {
  let n = 64;
  while (n < count) n *= 2;
  return n;
}

function u64At(words: Uint32Array, index: number): number {
  return words[index]! + words[index + 1]! * TWO_32;
}

// ------------------------------------------------------------- helpers

/** The current CUDA device of this thread ("cuda"). */
function currentCudaDevice(sym: NativeSymbols): number {
  const status = sym.mtc_cuda_current_device(outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_last_error() || statusName(status));
  return outWords[0]! | 0;
}

function planError(sym: NativeSymbols, plan: number, status: number, t: Traversal): MtcError {
  const message = sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status);
  const leaf = sym.mtc_plan_error_leaf(plan);
  const path = leaf >= 0 && leaf < t.leaves.length ? leafPath(t, leaf) : undefined;
  return new MtcError(status, message, { path });
}

function disposedError(): MtcError {
  return new MtcError(Status.MTC_ERR_INVALID_STATE, "this AsyncCopyHandle was disposed");
}

/** A zero-byte device→host result: an empty array of the leaf's kind. */
function emptyHostOutput(source: DeviceTensor): HostLeaf {
  const data = allocateStorage(source.dtype, 0);
  if (source.shape.length === 1 && isNaturalDType(source.dtype)) return data;
  return new Tensor(data, source.shape, source.dtype);
}

/** Tells the plan the stream of each device involved: explicit ones first, else the current stream. */
function bindStreams(sym: NativeSymbols, plan: number, target: number, explicit: readonly Stream[] | null): void {
  const bound: number[] = []; // devices told already: one stream per device
  const bind = (device: number, stream: Stream) => {
    if (bound.includes(device)) return;
    bound.push(device);
    stream.checkLive();
    const setStream = requireSymbol("mtc_plan_set_stream", "streams");
    const status = setStream(plan, device, stream.handle);
    if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_plan_last_error(plan) || sym.mtc_last_error() || statusName(status));
  };
  if (explicit !== null) {
    for (const stream of explicit) {
      const device = stream.deviceIndex;
      if (device === target || sourceDevices.includes(device)) bind(device, stream);
    }
  }
  if (openScopes === 0) return;
  if (target !== DEVICE_CPU) {
    const current = streamFor(target);
    if (current !== null) bind(target, current);
  }
  for (const device of sourceDevices) {
    const current = streamFor(device);
    if (current !== null) bind(device, current);
  }
}

// ------------------------------------------------------------- the plan

/** What a handle holds while it has a C plan; also the finalizer's held value (never the handle). */
interface PlanRecord {
  plan: number;
  traversal: Traversal | null;
  /** Block shares of DeviceTensor sources, dropped once the copy is done. */
  shares: BlockHolder[];
}

/** The plan's mtc_plan_stats now, as a fresh copy of the bytes (null where libmtc lacks the call). */
function snapshotStats(plan: number): Uint8Array | null {
  const getStats = library().symbols.mtc_plan_get_stats;
  if (getStats === undefined) return null;
  return getStats(plan, statsBytes) === Status.MTC_OK ? statsBytes.slice() : null;
}

/** Records whose C plan is not released yet: the exit hook stops their reads. */
const livePlans = new Set<PlanRecord>();

function releaseRecord(record: PlanRecord): void {
  livePlans.delete(record);
  // mtc_plan_release waits for a copy in flight, then frees outputs nobody retained.
  library().symbols.mtc_plan_release(record.plan);
  record.plan = 0;
  record.traversal = null;
  for (const holder of record.shares) holder.drop();
  record.shares = [];
}

/**
 * Backstop for handles dropped without get() or dispose(). The record holds
 * the inputs strongly, so they outlive the copy that reads them.
 */
const planRegistry = new FinalizationRegistry<PlanRecord>((record) => releaseWhenDone(record, 1));

/**
 * Releases a dropped handle's plan once its copy is over. mtc_plan_release
 * would wait for a copy in flight and stall the event loop that long, so
 * the release is retried on a timer that does not keep the process alive.
 */
function releaseWhenDone(record: PlanRecord, delayMs: number): void {
  if (record.plan === 0) return;
  if (library().symbols.mtc_plan_poll(record.plan) === Status.MTC_IN_PROGRESS) {
    unrefTimer(setTimeout(() => releaseWhenDone(record, Math.min(delayMs * 2, 100)), delayMs));
    return;
  }
  releaseRecord(record);
}

/** Lets a timer not keep the process alive (Bun: timer.unref(); Deno: Deno.unrefTimer). */
function unrefTimer(timer: unknown): void {
  const deno = (globalThis as unknown as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
  if (deno?.unrefTimer !== undefined) deno.unrefTimer(timer as number);
  else (timer as { unref?: () => void }).unref?.();
}

// `await` polls the plan on setImmediate (Bun and Deno 2 have it) for a
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
function spin(step: () => boolean, slow: () => void): void {
  const start = performance.now();
  const tick = () => {
    if (step()) return;
    if (performance.now() - start >= SPIN_MS) slow();
    else soon(tick);
  };
  soon(tick);
}

// ----------------------------------------------------------- the results

/** Device targets: one DeviceTensor per leaf, one BlockHolder (one mtc_block_retain) per distinct block. */
function collectDevice(t: Traversal): void {
  const words = resultWords;
  const count = t.leaves.length;
  const holders = new Map<number, BlockHolder>();
  for (let i = 0; i < count; i++) {
    const at = i * (RESULT_BYTES / 4);
    const leaf = t.leaves[i]!;
    const flags = words[at + 7]!;
    if ((flags & RESULT_REUSED) !== 0) {
      place(t, i, leaf);
      continue;
    }
    const block = u64At(words, at + 2);
    let holder: BlockHolder | null = null;
    if (block !== 0) {
      holder = holders.get(block) ?? null;
      if (holder === null) {
        holder = new BlockHolder(block); // mtc_block_retain, once per distinct block
        holders.set(block, holder);
      }
      holder.acquire();
    }
    let shape: readonly number[];
    let dtype: DType;
    let byteLength: number;
    if (leaf instanceof Tensor) {
      shape = leaf.shape;
      dtype = leaf.dtype;
      byteLength = leaf.data.byteLength;
    } else if (leaf instanceof DeviceTensor) {
      shape = leaf.shape;
      dtype = leaf.dtype;
      byteLength = leaf.byteLength;
    } else {
      shape = [leaf.length];
      dtype = dtypeOf(leaf);
      byteLength = leaf.byteLength;
    }
    const output = new DeviceTensor(
      u64At(words, at),
      shape,
      dtype,
      resultInts[at + 6]!,
      byteLength,
      block,
      u64At(words, at + 4),
      (flags & RESULT_PACKED) !== 0,
      holder,
    );
    place(t, i, output);
  }
}

/** Where leaves landed in one pinned host block: its start and the bytes they span. */
interface HostSpan {
  base: number;
  end: number;
  buffer: ArrayBuffer | null;
}

/**
 * Host target: every leaf becomes a view into one ArrayBuffer per pinned
 * block (covering the leaves in it); each buffer holds one C reference to
 * its block (see host_output.ts). No bytes are copied.
 */
function collectHost(lib: MtcLibrary, t: Traversal): void {
  const words = resultWords;
  const count = t.leaves.length;
  const spans = new Map<number, HostSpan>();
  for (let i = 0; i < count; i++) {
    const at = i * (RESULT_BYTES / 4);
    if ((words[at + 7]! & RESULT_REUSED) !== 0) continue;
    const block = u64At(words, at + 2);
    if (block === 0) continue;
    const offset = u64At(words, at + 4);
    const end = offset + (t.leaves[i] as DeviceTensor).byteLength;
    const span = spans.get(block);
    if (span === undefined) spans.set(block, { base: u64At(words, at) - offset, end, buffer: null });
    else if (end > span.end) span.end = end;
  }
  for (const [block, span] of spans) span.buffer = pinnedBuffer(lib, block, span.base, span.end);
  for (let i = 0; i < count; i++) {
    const at = i * (RESULT_BYTES / 4);
    const leaf = t.leaves[i]!;
    if ((words[at + 7]! & RESULT_REUSED) !== 0) {
      place(t, i, leaf);
      continue;
    }
    const source = leaf as DeviceTensor;
    const block = u64At(words, at + 2);
    if (block === 0) {
      place(t, i, emptyHostOutput(source));
      continue;
    }
    const span = spans.get(block)!;
    const offset = u64At(words, at) - span.base;
    place(t, i, hostLeafView(span.buffer!, offset, source.dtype, source.shape, isNaturalDType(source.dtype)));
  }
}

// ------------------------------------------------------------ the handle

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
  /** A Deno nonblocking mtc_plan_wait is running on another thread: the plan must not be released. */
  #waitPending = false;
  #releaseDeferred = false;
  #promise: Promise<T> | null = null;
  /** Leaves the traversal found on the target already (never in the C plan). */
  #reused: number;
  /** mtc_plan_stats bytes, taken when the plan was released. */
  #stats: Uint8Array | null = null;

  /** @internal Made by startCopy. */
  constructor(record: PlanRecord | null, target: number, done?: T, reused = 0) {
    this.#record = record;
    this.#target = target;
    this.#reused = reused;
    if (record === null) this.#result = { value: done as T };
    else planRegistry.register(this, record, this);
  }

  /** True once the copy is over (done or failed, or the handle disposed). Never blocks. */
  ready(): boolean {
    if (this.#finished >= 0 || this.#record === null || this.#disposed) return true;
    const status = library().symbols.mtc_plan_poll(this.#record.plan);
    if (status === Status.MTC_IN_PROGRESS) return false;
    this.#finished = status;
    return true;
  }

  /**
   * The copied batch, waiting for the copy if needed (blocking the thread).
   * Returns the same object on every call; throws the copy's MtcError (the
   * same one on every call), or MTC_ERR_INVALID_STATE after dispose().
   */
  get(): T {
    if (this.#disposed) throw disposedError();
    if (this.#result !== null) return this.#result.value;
    if (this.#error !== null) throw this.#error;
    const record = this.#record!;
    const sym = library().symbols;
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
   * Makes `await handle` work; waits without blocking the event loop.
   * Rejects with MTC_ERR_INVALID_STATE after dispose(), as get() throws.
   */
  then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onRejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    if (this.#disposed) return Promise.reject(disposedError()).then(onFulfilled, onRejected);
    return this.#settled().then(onFulfilled, onRejected);
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
    if (this.#disposed) throw disposedError();
    const record = this.#record;
    if (record === null) return null;
    const completion = requireSymbol("mtc_plan_completion_event", "completion events");
    const status = completion(record.plan, outWords);
    if (status !== Status.MTC_OK) throw planError(library().symbols, record.plan, status, record.traversal!);
    const event = u64At(outWords, 0);
    return event === 0 ? null : new CudaEvent(event);
  }

  #releasePlan(): void {
    const record = this.#record;
    if (record === null) return;
    if (this.#waitPending) {
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
    const lib = library();
    const t = record.traversal!;
    const count = t.leaves.length;
    if (resultWords.length * 4 < count * RESULT_BYTES) {
      resultWords = new Uint32Array((capacityFor(count) * RESULT_BYTES) / 4);
      resultInts = new Int32Array(resultWords.buffer);
    }
    const status = lib.symbols.mtc_plan_results(record.plan, 0, count, resultWords);
    if (status !== Status.MTC_OK) throw planError(lib.symbols, record.plan, status, t);
    if (this.#target === DEVICE_CPU) collectHost(lib, t);
    else collectDevice(t);
    return t.root[0] as T;
  }

  #settled(): Promise<T> {
    return (this.#promise ??= new Promise<T>((resolve, reject) => {
      const finish = () => {
        try {
          resolve(this.get());
        } catch (e) {
          reject(e);
        }
      };
      if (this.ready()) return finish();
      const record = this.#record!;
      const waitNonblocking = library().symbols.mtc_plan_wait_nonblocking;
      const waitOnThread = (wait: NonNullable<typeof waitNonblocking>) => {
        // Deno: mtc_plan_wait on an FFI thread; the plan is not released until it returns.
        this.#waitPending = true;
        wait(record.plan).then(
          (status) => {
            this.#waitPending = false;
            if (this.#finished < 0) this.#finished = status;
            if (this.#releaseDeferred) this.#releasePlan();
            finish();
          },
          (e) => {
            this.#waitPending = false;
            if (this.#releaseDeferred) this.#releasePlan();
            reject(e);
          },
        );
      };
      /** Finishes when the copy is over; false while it is in flight. */
      const over = () => {
        if (!this.ready()) return false;
        finish();
        return true;
      };
      let delay = 1;
      const poll = () => {
        if (over()) return;
        setTimeout(poll, delay);
        delay = Math.min(delay * 2, MAX_DELAY_MS);
      };
      spin(over, waitNonblocking !== undefined ? () => waitOnThread(waitNonblocking) : poll);
    }));
  }
}

// ------------------------------------------------------------ startCopy

/**
 * Starts copying every tensor leaf of `data` to `device` and returns at once
 * (staging and submission run on the C library's background thread).
 *
 * `data` is any nesting of arrays, plain objects and Maps; its leaves are
 * typed arrays (1-D tensors), {@link Tensor}s and {@link DeviceTensor}s. The
 * result mirrors it with new containers; tensors already on `device` are
 * reused as they are (the same object), and everything else (numbers,
 * strings, null, class instances, DataViews, Sets, ...) passes through by
 * identity. Sources may mix host leaves and DeviceTensors of several
 * devices.
 *
 * Copies to "cpu" give typed arrays (1-D, natural dtype) or Tensors that
 * VIEW the pinned host memory the copy filled (zero-copy): the outputs of
 * one copy usually share one pinned block, which goes back to the library's
 * pool when the garbage collector frees the last of them, or at once with
 * {@link releaseHostOutput} / `disposeAll` (which empty every view of it).
 *
 * Streams: the copy is ordered against the current stream of every device
 * involved ({@link withStream}): DeviceTensor sources are read after the
 * work queued on their device's current stream before this call, and the
 * target's current stream waits for the copy. Without a current stream the
 * copy is ordered with nothing the caller queued: synchronize first.
 *
 * Inputs must stay unchanged until the copy is over (`ready()` is true).
 * Throws MtcError at once for a bad device, bad options, a cycle, a bad or
 * disposed leaf (with its path), or a target the driver cannot serve.
 *
 * @example
 * ```ts
 * const handle = startCopy({ boxes: new Tensor(new Float32Array(8), [2, 4]), id: 7 }, "cuda:0");
 * const onGpu = await handle;        // { boxes: DeviceTensor, id: 7 }
 * const back = await startCopy(onGpu, "cpu"); // { boxes: Tensor viewing pinned memory, id: 7 }
 * disposeAll([onGpu, back]);
 * ```
 */
export function startCopy<T, D extends Device>(
  data: T,
  device: D,
  options?: CopyOptions,
): AsyncCopyHandle<Copied<T, D>> {
  return startCopyWith(data, device, options, null);
}

/**
 * @internal startCopy with streams to order the copy against, besides the
 * current ones: for each device involved (the target, a source device), an
 * explicit stream here wins over that device's current stream.
 */
export function startCopyWith<T, D extends Device>(
  data: T,
  device: D,
  options: CopyOptions | undefined,
  streams: readonly Stream[] | null,
): AsyncCopyHandle<Copied<T, D>> {
  let target = parseDevice(device);
  const resolved = resolveOptions(options);
  if (target === CURRENT_CUDA) target = currentCudaDevice(library().symbols);
  const t = traverse(data, target);
  if (t.leaves.length === 0) {
    return new AsyncCopyHandle<Copied<T, D>>(null, target, t.root[0] as Copied<T, D>, t.reused);
  }

  const lib = library();
  const sym = lib.symbols;
  encodeOptions(resolved, optionsView);
  const created = sym.mtc_plan_create(target, optionsBytes, outWords);
  if (created !== Status.MTC_OK) throw new MtcError(created, sym.mtc_last_error() || statusName(created));
  const plan = u64At(outWords, 0);
  const record: PlanRecord = { plan, traversal: t, shares: [] };
  livePlans.add(record);
  try {
    writeLeaves(lib, t, record.shares);
    let status = sym.mtc_plan_add_leaves(plan, leafWords, t.leaves.length);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
    if (openScopes !== 0 || streams !== null) bindStreams(sym, plan, target, streams);
    status = sym.mtc_plan_submit(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  } catch (e) {
    releaseRecord(record);
    throw e;
  }
  if (!exitHookSet) setExitHook(lib);
  return new AsyncCopyHandle<Copied<T, D>>(record, target, undefined, t.reused);
}

/**
 * When this runtime (or this Deno worker) goes away it frees its JavaScript
 * memory while copies may still be in flight, and the background thread may
 * still be reading a leaf to stage it. The exit hook stops the reads of every
 * plan of this runtime first (mtc_plan_stop_reading, waiting up to
 * EXIT_WAIT_MS for a read in progress); copies already staged go on. Plans of
 * other workers are left alone.
 */
const EXIT_WAIT_MS = 10_000;
let exitHookSet = false;

function setExitHook(lib: MtcLibrary): void {
  exitHookSet = true;
  const stop = lib.symbols.mtc_plan_stop_reading;
  if (stop === undefined) return;
  onExit(() => {
    for (const record of livePlans) stop(record.plan, EXIT_WAIT_MS);
  });
}
