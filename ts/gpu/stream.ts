/**
 * CUDA streams and events, and the per-device "current stream" that copies
 * are ordered against.
 *
 * A copy never runs on the caller's stream: libmtc copies on its own
 * per-device copy streams. A stream made current with {@link withStream}
 * (or passed by {@link ToDevice}) orders the copy against the caller's GPU
 * work instead: the copy reads GPU sources only after the work queued on
 * their device's current stream before `startCopy`, and the target device's
 * current stream waits for the copy, so work queued on it afterwards sees
 * the copied data without any host synchronization. `ready()`/`get()` still
 * wait for the copy only, never for the caller's work.
 *
 * @module
 */

import { CURRENT_CUDA, DEVICE_CPU, type Device, deviceName, parseDevice } from "./device.ts";
import { invalidArgument, MtcError, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";

const TWO_32 = 4294967296;
/** Out-parameters: uint64_t *out_stream, mtc_event **out_event, int32_t *out_device. */
const outWords = new Uint32Array(2);

function u64Out(): number {
  return outWords[0]! + outWords[1]! * TWO_32;
}

function fail(status: number): MtcError {
  return new MtcError(status, library().symbols.mtc_last_error() || statusName(status));
}

/** The CUDA ordinal a device names ("cuda" is the current device); "cpu" is an error. */
export function cudaOrdinal(device: Device | number, what: string): number {
  let ordinal: number;
  if (typeof device === "number") {
    if (!Number.isInteger(device) || device < 0 || device > 0x7fffffff) {
      throw invalidArgument(`${what}: invalid device ordinal ${device}`);
    }
    ordinal = device;
  } else {
    ordinal = parseDevice(device);
  }
  if (ordinal === DEVICE_CPU) throw invalidArgument(`${what}: "cpu" has no streams; use "cuda" or "cuda:N"`);
  if (ordinal === CURRENT_CUDA) {
    const sym = library().symbols;
    const status = sym.mtc_cuda_current_device(outWords);
    if (status !== Status.MTC_OK) throw fail(status);
    ordinal = outWords[0]! | 0;
  }
  return ordinal;
}

function rawHandle(raw: number | bigint, what: string): number {
  const value = typeof raw === "bigint" ? Number(raw) : raw;
  if (!Number.isSafeInteger(value) || value <= 0 || (typeof raw === "bigint" && BigInt(value) !== raw)) {
    throw invalidArgument(`${what}: ${String(raw)} is not a CUstream handle (a nonzero pointer value)`);
  }
  return value;
}

// ------------------------------------------------------------------ events

/** Backstop for events dropped without dispose(): the registry holds the mtc_event pointer. */
const eventRegistry = new FinalizationRegistry<number>((event) => library().symbols.mtc_event_release?.(event));

/** @internal The mtc_event pointer of a live event (throws after dispose). */
export let eventPointer: (event: CudaEvent) => number;

/**
 * A recorded CUDA event: it completes when the work queued on its stream
 * before it was recorded has finished. Made by {@link Stream.recordEvent}
 * and by `AsyncCopyHandle.completionEvent()`. Holds one reference to the C
 * event; `dispose()` (or `using`) drops it, garbage collection is the
 * backstop.
 *
 * @example
 * ```ts
 * using event = stream.recordEvent();
 * while (!event.query()) doOtherWork();
 * otherLibrary.streamWaitEvent(otherStream, event.handle); // a raw CUevent
 * ```
 */
export class CudaEvent {
  #event: number;

  /** @internal Adopts one reference to an mtc_event. */
  constructor(event: number) {
    this.#event = event;
    eventRegistry.register(this, event, this);
  }

  static {
    eventPointer = (event) => event.#live();
  }

  #live(): number {
    if (this.#event === 0) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "this CudaEvent was disposed");
    return this.#event;
  }

  /** The raw CUevent, for other libraries to wait on; valid until dispose(). */
  get handle(): number {
    return requireSymbol("mtc_event_handle", "events")(this.#live());
  }

  /** True when the event has completed. Never blocks. */
  query(): boolean {
    const status = requireSymbol("mtc_event_query", "events")(this.#live());
    if (status === Status.MTC_OK) return true;
    if (status === Status.MTC_IN_PROGRESS) return false;
    throw fail(status);
  }

  /** Blocks the calling thread until the event has completed. */
  synchronize(): void {
    const status = requireSymbol("mtc_event_synchronize", "events")(this.#live());
    if (status !== Status.MTC_OK) throw fail(status);
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#event === 0;
  }

  /** Drops this object's reference to the event. Idempotent. */
  dispose(): void {
    const event = this.#event;
    if (event === 0) return;
    this.#event = 0;
    eventRegistry.unregister(this);
    library().symbols.mtc_event_release?.(event);
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

// ----------------------------------------------------------------- streams

interface OwnedStream {
  device: number;
  handle: number;
}

/** Backstop for streams made by Stream.create and dropped without dispose(). */
const streamRegistry = new FinalizationRegistry<OwnedStream>((s) =>
  library().symbols.mtc_stream_destroy?.(s.device, s.handle)
);

/**
 * A CUDA stream of one device: one made here ({@link Stream.create},
 * destroyed by `dispose()`), or one made by another library and wrapped
 * ({@link Stream.wrap}, never destroyed here).
 *
 * @example
 * ```ts
 * using stream = Stream.create("cuda:0");
 * const onGpu = await withStream(stream, () => startCopy(batch, "cuda:0"));
 * // work queued on `stream` from here on sees onGpu's data
 * ```
 */
export class Stream {
  /** The device: "cuda:N". */
  readonly device: Device;
  /** Its CUDA ordinal N. */
  readonly deviceIndex: number;
  /** The raw CUstream, for other libraries (a pointer value; never 0). */
  readonly handle: number;
  /** True for streams made by {@link Stream.create}: dispose() destroys them. */
  readonly owned: boolean;
  #disposed = false;

  private constructor(deviceIndex: number, handle: number, owned: boolean) {
    this.deviceIndex = deviceIndex;
    this.device = deviceName(deviceIndex);
    this.handle = handle;
    this.owned = owned;
    if (owned) streamRegistry.register(this, { device: deviceIndex, handle }, this);
  }

  /**
   * Creates a non-blocking stream on `device` ("cuda" is the current
   * device), destroyed by dispose() (work queued on it still runs).
   */
  static create(device: Device | number = "cuda"): Stream {
    const create = requireSymbol("mtc_stream_create", "streams");
    const ordinal = cudaOrdinal(device, "Stream.create");
    const status = create(ordinal, outWords);
    if (status !== Status.MTC_OK) throw fail(status);
    return new Stream(ordinal, u64Out(), true);
  }

  /**
   * Wraps a CUstream made elsewhere (PyTorch's `stream.cuda_stream`, CuPy's
   * `stream.ptr`, ...) that belongs to `device`. The library never destroys
   * it; the caller keeps it alive while it is used here.
   */
  static wrap(rawCuStream: number | bigint, device: Device | number): Stream {
    const handle = rawHandle(rawCuStream, "Stream.wrap");
    return new Stream(cudaOrdinal(device, "Stream.wrap"), handle, false);
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** @internal Throws MTC_ERR_INVALID_STATE after dispose(). */
  checkLive(): void {
    if (this.#disposed) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `this Stream (${this.device}) was disposed`);
    }
  }

  /** Blocks the calling thread until all work queued on the stream has finished. */
  synchronize(): void {
    this.checkLive();
    const status = requireSymbol("mtc_stream_synchronize", "streams")(this.deviceIndex, this.handle);
    if (status !== Status.MTC_OK) throw fail(status);
  }

  /** Records an event that completes when the work queued on this stream so far has finished. */
  recordEvent(): CudaEvent {
    this.checkLive();
    const record = requireSymbol("mtc_event_record", "events");
    const status = record(this.deviceIndex, this.handle, outWords);
    if (status !== Status.MTC_OK) throw fail(status);
    return new CudaEvent(u64Out());
  }

  /**
   * Makes work queued on this stream from now on wait for `event` (of any
   * device), without blocking the host.
   */
  waitEvent(event: CudaEvent): void {
    this.checkLive();
    const wait = requireSymbol("mtc_stream_wait_event", "events");
    const status = wait(this.deviceIndex, this.handle, eventPointer(event));
    if (status !== Status.MTC_OK) throw fail(status);
  }

  /**
   * Makes work queued on this stream from now on wait for the work queued
   * on `other` so far (an event recorded on `other`, waited on, released).
   */
  waitStream(other: Stream): void {
    this.checkLive();
    const event = other.recordEvent();
    try {
      this.waitEvent(event);
    } finally {
      event.dispose();
    }
  }

  /** Destroys the stream if {@link Stream.create} made it; a wrapped one is only marked disposed. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (!this.owned) return;
    streamRegistry.unregister(this);
    library().symbols.mtc_stream_destroy?.(this.deviceIndex, this.handle);
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

// ---------------------------------------------------------- current stream

/** Per device ordinal: the streams made current by enclosing withStream scopes, innermost last. */
const stacks: (Stream[] | undefined)[] = [];

/**
 * @internal The number of open withStream scopes, all devices together:
 * startCopy looks streams up only when it is nonzero.
 */
export let openScopes = 0;

/** @internal The current stream of a CUDA ordinal, or null. */
export function streamFor(device: number): Stream | null {
  const stack = stacks[device];
  return stack === undefined || stack.length === 0 ? null : stack[stack.length - 1]!;
}

function push(stream: Stream): void {
  (stacks[stream.deviceIndex] ??= []).push(stream);
  openScopes++;
}

function pop(stream: Stream): void {
  const stack = stacks[stream.deviceIndex]!;
  // Innermost first; async scopes that interleave may end out of order.
  const at = stack.lastIndexOf(stream);
  if (at >= 0) stack.splice(at, 1);
  openScopes--;
}

/**
 * Runs `fn` with `stream` as the current stream of its device, and returns
 * what `fn` returns. Copies started meanwhile (`startCopy`, `prefetch`,
 * `ToDevice` without a compute stream) are ordered against it: GPU sources
 * on that device are read after the work queued on `stream` before the copy
 * started, and when the device is the copy's target, `stream` waits for
 * the copy (work queued on it afterwards sees the data).
 *
 * Scopes nest, per device. When `fn` returns a Promise (an async
 * function does), `stream` stays current until that promise settles; any
 * other value, an AsyncCopyHandle included, is returned as it is, the scope
 * closed (a handle took its streams when startCopy ran). Caveat: the
 * current stream is process-wide, not per async task, so other code that
 * runs while an async scope is pending (other tasks awaiting in between)
 * sees it too, and concurrent async scopes on one device interleave: a copy
 * uses whichever scope was entered last and is still open.
 *
 * @example
 * ```ts
 * const compute = Stream.create("cuda:0");
 * const onGpu = withStream(compute, () => startCopy(batch, "cuda:0").get());
 * // kernels queued on `compute` now see onGpu
 * ```
 */
export function withStream<R>(stream: Stream, fn: () => R): R {
  if (!(stream instanceof Stream)) throw invalidArgument("withStream needs a Stream");
  stream.checkLive();
  push(stream);
  let result: R;
  try {
    result = fn();
  } catch (e) {
    pop(stream);
    throw e;
  }
  // A Promise (what async functions return) keeps the scope open until it
  // settles. Other thenables do not: an AsyncCopyHandle took its streams
  // when startCopy ran, and comes back as it is.
  if (result instanceof Promise) {
    return result.then(
      (value) => {
        pop(stream);
        return value;
      },
      (error: unknown) => {
        pop(stream);
        throw error;
      },
    ) as R;
  }
  pop(stream);
  return result;
}

/**
 * The stream a copy started now would be ordered against on `device`
 * ("cuda" is the current device): the innermost open {@link withStream}
 * scope's, or null (no ordering with the caller's work).
 *
 * @example
 * ```ts
 * withStream(stream, () => currentStream("cuda:0") === stream); // true
 * ```
 */
export function currentStream(device: Device | number = "cuda"): Stream | null {
  return streamFor(cudaOrdinal(device, "currentStream"));
}
