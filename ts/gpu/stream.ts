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
import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { adoptEvent, type CudaEvent, eventPointer } from "./event.ts";

const TWO_32 = 4294967296;
/** Out-parameters: uint64_t *out_stream, mtc_event **out_event, int32_t *out_device. */
const outWords = new Uint32Array(2);

function u64Out(): number {
  return outWords[0]! + outWords[1]! * TWO_32;
}

/** A failed C call of `call` ("Stream.create"): the message starts with the call's name, as every GPU call's does. */
function fail(status: number, call: string): MtcError {
  return new MtcError(status, `${call}: ${library().symbols.mtc_last_error() || statusName(status)}`);
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
    ordinal = parseDevice(device, `${what}: `);
  }
  if (ordinal === DEVICE_CPU) throw invalidArgument(`${what}: "cpu" has no streams; use "cuda" or "cuda:N"`);
  if (ordinal === CURRENT_CUDA) {
    const sym = library().symbols;
    const status = sym.mtc_cuda_current_device(outWords);
    if (status !== Status.MTC_OK) throw fail(status, what);
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

// ----------------------------------------------------------------- streams

/**
 * Only this module holds it; the constructor takes it, so that no caller
 * makes an owned Stream (one that dispose() destroys) around a handle of
 * its choosing.
 */
const MADE_HERE = Symbol("made by libmtc");

interface OwnedStream {
  device: number;
  handle: number;
}

/** @internal True for a Stream of this library (its private state), false for a look-alike; runs no caller code. */
export let isStream: (value: unknown) => value is Stream;

/**
 * @internal The raw CUstream of a live Stream, from its private state
 * (MTC_ERR_INVALID_STATE after dispose()): for a call to hand to C right
 * away, with no caller code run in between.
 */
export let liveHandle: (stream: Stream, call?: string) => number;

/** @internal A Stream's CUDA ordinal, from its private state. */
export let streamOrdinal: (stream: Stream) => number;

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
  // Private state, read by every call that hands the stream to C: a field
  // the caller redefines (a getter on `handle`) is never consulted.
  readonly #deviceIndex: number;
  readonly #handle: number;
  readonly #owned: boolean;
  #disposed = false;

  private constructor(made: symbol, deviceIndex: number, handle: number, owned: boolean) {
    if (made !== MADE_HERE) throw invalidArgument("new Stream(): a Stream is made by Stream.create or Stream.wrap");
    this.#deviceIndex = deviceIndex;
    this.#handle = handle;
    this.#owned = owned;
    if (owned) streamRegistry.register(this, { device: deviceIndex, handle }, this);
  }

  static {
    markClass(this, "Stream");
    isStream = (value): value is Stream => typeof value === "object" && value !== null && #disposed in value;
    liveHandle = (stream, call) => {
      stream.#checkLive(call);
      return stream.#handle;
    };
    streamOrdinal = (stream) => stream.#deviceIndex;
    // console.log: "Stream(cuda:0, owned)", "Stream(cuda:1, wrapped, disposed)".
    defineInspect<Stream>(this.prototype, "Stream", (s) => {
      if (!(#disposed in s)) return "Stream (not made by this library)";
      return `Stream(${deviceName(s.#deviceIndex)}, ${s.#owned ? "owned" : "wrapped"}${s.#disposed ? ", disposed" : ""})`;
    });
  }

  /**
   * Creates a non-blocking stream on `device` ("cuda" is the current
   * device), destroyed by dispose() (work queued on it still runs).
   */
  static create(device: Device | number = "cuda"): Stream {
    const create = requireSymbol("mtc_stream_create", "streams");
    const ordinal = cudaOrdinal(device, "Stream.create");
    const status = create(ordinal, outWords);
    if (status !== Status.MTC_OK) throw fail(status, "Stream.create");
    return new Stream(MADE_HERE, ordinal, u64Out(), true);
  }

  /**
   * Wraps a CUstream made elsewhere (PyTorch's `stream.cuda_stream`, CuPy's
   * `stream.ptr`, ...) that belongs to `device`. The library never destroys
   * it; the caller keeps it alive while it is used here.
   */
  static wrap(rawCuStream: number | bigint, device: Device | number): Stream {
    const handle = rawHandle(rawCuStream, "Stream.wrap");
    return new Stream(MADE_HERE, cudaOrdinal(device, "Stream.wrap"), handle, false);
  }

  /** The device: "cuda:N". */
  get device(): Device {
    return deviceName(this.#deviceIndex);
  }

  /** Its CUDA ordinal N. */
  get deviceIndex(): number {
    return this.#deviceIndex;
  }

  /**
   * The raw CUstream, for other libraries (a pointer value; never 0).
   * MtcError (MTC_ERR_INVALID_STATE) after dispose(), for a wrapped stream
   * too: a destroyed stream's pointer may name another stream by then.
   */
  get handle(): number {
    this.#checkLive("Stream.handle");
    return this.#handle;
  }

  /** True for streams made by {@link Stream.create}: dispose() destroys them. */
  get owned(): boolean {
    return this.#owned;
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** @internal Throws MTC_ERR_INVALID_STATE after dispose(). */
  checkLive(): void {
    this.#checkLive();
  }

  /** `call`: the method the error names ("Stream.synchronize"), or none. */
  #checkLive(call?: string): void {
    if (this.#disposed) {
      const where = call === undefined ? "" : `${call}: `;
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${where}this Stream (${deviceName(this.#deviceIndex)}) was disposed`);
    }
  }

  // Each call below checks liveness and calls C with nothing in between
  // that could run the caller's code (private fields, no getters).

  /** Blocks the calling thread until all work queued on the stream has finished. */
  synchronize(): void {
    const sync = requireSymbol("mtc_stream_synchronize", "streams");
    this.#checkLive("Stream.synchronize");
    const status = sync(this.#deviceIndex, this.#handle);
    if (status !== Status.MTC_OK) throw fail(status, "Stream.synchronize");
  }

  /** Records an event that completes when the work queued on this stream so far has finished. */
  recordEvent(): CudaEvent {
    return this.#record("Stream.recordEvent");
  }

  #record(call: string): CudaEvent {
    const record = requireSymbol("mtc_event_record", "events");
    this.#checkLive(call);
    const status = record(this.#deviceIndex, this.#handle, outWords);
    if (status !== Status.MTC_OK) throw fail(status, call);
    return adoptEvent(u64Out());
  }

  /**
   * Makes work queued on this stream from now on wait for `event` (of any
   * device), without blocking the host.
   */
  waitEvent(event: CudaEvent): void {
    this.#wait(eventPointer(event, "Stream.waitEvent"), "Stream.waitEvent");
  }

  #wait(event: number, call: string): void {
    const wait = requireSymbol("mtc_stream_wait_event", "events");
    this.#checkLive(call);
    const status = wait(this.#deviceIndex, this.#handle, event);
    if (status !== Status.MTC_OK) throw fail(status, call);
  }

  /**
   * Makes work queued on this stream from now on wait for the work queued
   * on `other` so far (an event recorded on `other`, waited on, released).
   */
  waitStream(other: Stream): void {
    if (!isStream(other)) throw invalidArgument("Stream.waitStream: other must be a Stream");
    this.#checkLive("Stream.waitStream");
    const event = other.#record("Stream.waitStream");
    try {
      this.#wait(eventPointer(event, "Stream.waitStream"), "Stream.waitStream");
    } finally {
      event.dispose();
    }
  }

  /** Destroys the stream if {@link Stream.create} made it; a wrapped one is only marked disposed. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (!this.#owned) return;
    streamRegistry.unregister(this);
    library().symbols.mtc_stream_destroy?.(this.#deviceIndex, this.#handle);
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
  (stacks[streamOrdinal(stream)] ??= []).push(stream);
  openScopes++;
}

function pop(stream: Stream): void {
  const stack = stacks[streamOrdinal(stream)]!;
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
  if (!isStream(stream)) throw invalidArgument("withStream: the stream must be a Stream");
  liveHandle(stream, "withStream");
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
