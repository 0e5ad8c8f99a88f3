/**
 * startCopy and AsyncCopyHandle: one copy of a whole batch, with a constant
 * number of FFI calls however many leaves it has.
 *
 * @module
 */

import { BlockHolder } from "./block.ts";
import { CURRENT_CUDA, DEVICE_CPU, type Device, parseDevice } from "./device.ts";
import { DeviceTensor, holderOf } from "./device_tensor.ts";
import { allocateStorage, type DType, DTYPE_SIZE, dtypeOf, isNaturalDType, type TypedArray } from "./dtype.ts";
import { invalidArgument, MtcError, Status, statusName } from "./errors.ts";
import type { FfiBackend } from "./ffi/backend.ts";
import { library } from "./ffi/library.ts";
import type { NativeSymbols } from "./ffi/symbols.ts";
import { type CopyOptions, encodeOptions, OPTIONS_SIZE, resolveOptions } from "./options.ts";
import { Tensor } from "./tensor.ts";
import { type Leaf, leafPath, place, type Traversal, traverse } from "./traverse.ts";

// ------------------------------------------------------------------ types

/** A host leaf as copies to "cpu" give it back: a typed array (1-D, natural dtype) or a Tensor. */
export type HostLeaf = TypedArray | Tensor;

type PassThrough =
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

const LEAF_BYTES = 40; // sizeof(mtc_leaf)
const RESULT_BYTES = 32; // sizeof(mtc_leaf_result)
const RESULT_REUSED = 1;
const RESULT_PACKED = 2;
const TWO_32 = 4294967296;

// One descriptor buffer and one result buffer for all copies: C copies the
// descriptors in mtc_plan_add_leaves, and results are read synchronously.
let leafWords = new Uint32Array((64 * LEAF_BYTES) / 4);
let resultWords = new Uint32Array((64 * RESULT_BYTES) / 4);
let resultInts = new Int32Array(resultWords.buffer);
const optionsBytes = new Uint8Array(OPTIONS_SIZE);
const optionsView = new DataView(optionsBytes.buffer);
const outWords = new Uint32Array(2); // mtc_plan **, int32_t * out-parameters

function capacityFor(count: number): number {
  let n = 64;
  while (n < count) n *= 2;
  return n;
}

function u64At(words: Uint32Array, index: number): number {
  return words[index]! + words[index + 1]! * TWO_32;
}

function setU64At(words: Uint32Array, index: number, value: number): void {
  words[index] = value >>> 0;
  words[index + 1] = Math.floor(value / TWO_32);
}

// ------------------------------------------------------------- helpers

function leafDType(leaf: Leaf): DType {
  return leaf instanceof Tensor || leaf instanceof DeviceTensor ? leaf.dtype : dtypeOf(leaf);
}

function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (const extent of shape) count *= extent;
  return count;
}

function leafShape(leaf: Leaf): readonly number[] {
  return leaf instanceof Tensor || leaf instanceof DeviceTensor ? leaf.shape : [leaf.length];
}

/** The current CUDA device of this thread ("cuda"). */
function currentCudaDevice(sym: NativeSymbols): number {
  const status = sym.mtc_cuda_current_device(outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, sym.mtc_last_error() || statusName(status));
  return outWords[0]! | 0;
}

/** Writes leaf i's mtc_leaf for every listed leaf; takes a block share for each DeviceTensor source. */
function writeLeaves(backend: FfiBackend, t: Traversal, shares: BlockHolder[]): void {
  const count = t.leaves.length;
  if (leafWords.length * 4 < count * LEAF_BYTES) leafWords = new Uint32Array((capacityFor(count) * LEAF_BYTES) / 4);
  const w = leafWords;
  for (let i = 0; i < count; i++) {
    const leaf = t.leaves[i]!;
    const at = i * (LEAF_BYTES / 4);
    let address: number;
    let bytes: number;
    let device: number;
    let elementSize: number;
    if (leaf instanceof DeviceTensor) {
      address = leaf.address;
      bytes = leaf.byteLength;
      device = leaf.deviceIndex;
      elementSize = DTYPE_SIZE[leaf.dtype];
      const holder = holderOf(leaf);
      if (holder !== null) {
        holder.acquire(); // the source block lives until the copy has read it
        shares.push(holder);
      }
    } else {
      const data = leaf instanceof Tensor ? leaf.data : leaf;
      if (leaf instanceof Tensor && data.length !== elementCount(leaf.shape)) {
        throw invalidArgument(
          `the Tensor's ${data.constructor.name} has ${data.length} elements but its shape [${leaf.shape.join(", ")}] needs ` +
            `${elementCount(leaf.shape)} (was its buffer detached or resized?)`,
          leafPath(t, i),
        );
      }
      address = backend.pointerOf(data);
      bytes = data.byteLength;
      device = DEVICE_CPU;
      elementSize = leaf instanceof Tensor ? DTYPE_SIZE[leaf.dtype] : (data as Uint8Array).BYTES_PER_ELEMENT;
    }
    setU64At(w, at, address); // address
    setU64At(w, at + 2, bytes); // bytes
    w[at + 4] = 0; // row_pitch
    w[at + 5] = 0;
    w[at + 6] = device >>> 0; // device (int32)
    w[at + 7] = elementSize; // element_size
    w[at + 8] = 0; // row_count: contiguous
    w[at + 9] = 0; // flags
  }
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

/** Copies a device→host result out of its pinned block into JS-owned memory. */
function hostOutput(backend: FfiBackend, source: DeviceTensor, address: number): HostLeaf {
  const data = allocateStorage(source.dtype, source.byteLength / DTYPE_SIZE[source.dtype]);
  backend.copyFromAddress(address, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (source.shape.length === 1 && isNaturalDType(source.dtype)) return data;
  return new Tensor(data, source.shape, source.dtype);
}

// ------------------------------------------------------------- the plan

/** What a handle holds while it has a C plan; also the finalizer's held value (never the handle). */
interface PlanRecord {
  plan: number;
  traversal: Traversal | null;
  /** Block shares of DeviceTensor sources, dropped once the copy is done. */
  shares: BlockHolder[];
}

function releaseRecord(record: PlanRecord): void {
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
const planRegistry = new FinalizationRegistry<PlanRecord>((record) => {
  if (record.plan !== 0) releaseRecord(record);
});

// Bun has no nonblocking FFI call, so `await` polls: at once, then on
// setImmediate for a short spin window (small copies finish within it, and
// the event loop keeps running), then on setTimeout with a delay doubling
// up to a few milliseconds (long copies; bounded lateness, no busy CPU).
// Measured on the emulated driver (2-core VM, one 1 KiB leaf, median of
// 2000): await 23-27 µs from startCopy to result, against 81 µs for get(),
// whose mtc_plan_wait sleeps; Deno's nonblocking wait measured 93-105 µs.
const SPIN_MS = 2;
const MAX_DELAY_MS = 4;

type Schedule = (fn: () => void) => void;
const g = globalThis as unknown as { setImmediate?: (fn: () => void) => unknown };
const soon: Schedule = typeof g.setImmediate === "function"
  ? (fn) => void g.setImmediate!(fn)
  : (fn) => void setTimeout(fn, 0);

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

  /** @internal Made by startCopy. */
  constructor(record: PlanRecord | null, target: number, done?: T) {
    this.#record = record;
    this.#target = target;
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

  /** Makes `await handle` work; waits without blocking the event loop. */
  then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onRejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
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

  #releasePlan(): void {
    const record = this.#record;
    if (record === null) return;
    if (this.#waitPending) {
      this.#releaseDeferred = true;
      return;
    }
    this.#record = null;
    planRegistry.unregister(this);
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
    const words = resultWords;
    const holders = new Map<number, BlockHolder>();
    for (let i = 0; i < count; i++) {
      const at = i * (RESULT_BYTES / 4);
      const leaf = t.leaves[i]!;
      const address = u64At(words, at);
      const flags = words[at + 7]!;
      let output: unknown;
      if ((flags & RESULT_REUSED) !== 0) {
        output = leaf;
      } else if (this.#target === DEVICE_CPU) {
        output = hostOutput(lib.backend, leaf as DeviceTensor, address);
      } else {
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
        output = new DeviceTensor(
          {
            address,
            shape: leafShape(leaf),
            dtype: leafDType(leaf),
            device: resultInts[at + 6]!,
            block,
            offset: u64At(words, at + 4),
            packed: (flags & RESULT_PACKED) !== 0,
          },
          holder,
        );
      }
      place(t, i, output);
    }
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
      if (waitNonblocking !== undefined) {
        // Deno: mtc_plan_wait on an FFI thread; the plan is not released until it returns.
        this.#waitPending = true;
        waitNonblocking(record.plan).then(
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
        return;
      }
      const start = performance.now();
      let delay = 1;
      const step = () => {
        if (this.ready()) return finish();
        if (performance.now() - start < SPIN_MS) return soon(step);
        setTimeout(step, delay);
        delay = Math.min(delay * 2, MAX_DELAY_MS);
      };
      soon(step);
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
 * identity. Copies to "cpu" give typed arrays (1-D, natural dtype) or
 * Tensors in fresh ArrayBuffers.
 *
 * Inputs must stay unchanged until the copy is over (`ready()` is true).
 * Throws MtcError at once for a bad device, bad options, a cycle, a bad or
 * disposed leaf (with its path), or a target the driver cannot serve.
 *
 * @example
 * ```ts
 * const handle = startCopy({ boxes: new Tensor(new Float32Array(8), [2, 4]), id: 7 }, "cuda:0");
 * const onGpu = await handle;        // { boxes: DeviceTensor, id: 7 }
 * onGpu.boxes.dispose();
 * ```
 */
export function startCopy<T, D extends Device>(
  data: T,
  device: D,
  options?: CopyOptions,
): AsyncCopyHandle<Copied<T, D>> {
  let target = parseDevice(device);
  const resolved = resolveOptions(options);
  if (target === CURRENT_CUDA) target = currentCudaDevice(library().symbols);
  const t = traverse(data, target);
  if (t.leaves.length === 0) return new AsyncCopyHandle<Copied<T, D>>(null, target, t.root[0] as Copied<T, D>);

  const lib = library();
  const sym = lib.symbols;
  encodeOptions(resolved, optionsView);
  const created = sym.mtc_plan_create(target, optionsBytes, outWords);
  if (created !== Status.MTC_OK) throw new MtcError(created, sym.mtc_last_error() || statusName(created));
  const plan = u64At(outWords, 0);
  const record: PlanRecord = { plan, traversal: t, shares: [] };
  try {
    writeLeaves(lib.backend, t, record.shares);
    let status = sym.mtc_plan_add_leaves(plan, leafWords, t.leaves.length);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
    status = sym.mtc_plan_submit(plan);
    if (status !== Status.MTC_OK) throw planError(sym, plan, status, t);
  } catch (e) {
    releaseRecord(record);
    throw e;
  }
  return new AsyncCopyHandle<Copied<T, D>>(record, target);
}
