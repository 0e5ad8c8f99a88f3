/**
 * ToDevice: moving a batch between two devices as a linear operator, after
 * torchlinops' `ToDevice` (forward moves source → target, the adjoint moves
 * back, the normal operator is the identity), with one transfer stream per
 * device pair, shared through a module registry.
 *
 * @module
 */

import { type AsyncCopyHandle, type Copied, startCopyWith } from "./start_copy.ts";
import { newHandle } from "./handle.ts";
import { DEVICE_CPU, type Device, deviceName, parseDevice } from "../gpu/device.ts";
import { checkOptionNames, invalidArgument } from "../base/errors.ts";
import { defineInspect } from "../base/inspect.ts";
import type { CopyOptions } from "./options.ts";
import { cudaOrdinal, Stream } from "../gpu/stream.ts";

/**
 * A device and the streams its work runs on, for {@link ToDevice}.
 *
 * @example
 * ```ts
 * const gpu1: DeviceSpec = { device: "cuda:1", computeStream: Stream.create("cuda:1") };
 * ```
 */
export interface DeviceSpec<D extends Device = Device> {
  /** "cpu", "cuda" (the current device, resolved when the ToDevice is made) or "cuda:N". */
  device: D;
  /**
   * The stream this device's work runs on. As a source: the transfer reads
   * the batch only after the work queued on it before `forward`. As a
   * target: it waits for the transfer, so work queued on it afterwards sees
   * the data with no host synchronization. Without one, the device's
   * current stream ({@link withStream}) plays that part, if any.
   */
  computeStream?: Stream;
  /**
   * The transfer stream to use for transfers that this device's side
   * carries (a CUDA source's; a CUDA target's when the source is the host),
   * instead of the registry's stream for the pair.
   */
  transferStream?: Stream;
}

// ------------------------------------------------------ transfer streams

/** Transfer streams by device pair ("0->1", "-1->0"), made on first use. */
const registry = new Map<string, Stream>();

/** The device a pair's transfer stream lives on: the source's when it is a GPU, else the target's. */
function transferDevice(source: number, target: number): number {
  return source !== DEVICE_CPU ? source : target;
}

/**
 * The transfer stream of a (source, target) device pair, created on first
 * use and shared by every ToDevice between the same pair. It lives on the
 * source device when that is a GPU, else on the target; null for "cpu" to
 * "cpu" and for a device to itself (nothing is transferred).
 *
 * @example
 * ```ts
 * transferStream("cuda:0", "cuda:1") === new ToDevice("cuda:0", "cuda:1").transferStream; // true
 * ```
 */
export function transferStream(source: Device, target: Device): Stream | null {
  return streamOfPair(resolveDevice(source), resolveDevice(target));
}

function streamOfPair(source: number, target: number): Stream | null {
  if (source === target) return null;
  const key = `${source}->${target}`;
  let stream = registry.get(key);
  if (stream === undefined || stream.disposed) {
    stream = Stream.create(transferDevice(source, target));
    registry.set(key, stream);
  }
  return stream;
}

/**
 * Destroys the registry's transfer streams (work queued on them still
 * runs) and empties it; later transfers make new ones. For tests and for
 * shutting down cleanly.
 */
export function clearTransferStreams(): void {
  for (const stream of registry.values()) stream.dispose();
  registry.clear();
}

// ------------------------------------------------------------ operators

function resolveDevice(device: Device): number {
  const ordinal = parseDevice(device);
  return ordinal === DEVICE_CPU ? DEVICE_CPU : cudaOrdinal(device, "ToDevice");
}

/** A spec as read once, when the ToDevice was made: later changes to the caller's object change nothing. */
interface ResolvedSpec {
  readonly spec: DeviceSpec;
  readonly ordinal: number;
  readonly computeStream: Stream | undefined;
  readonly transferStream: Stream | undefined;
}

const SPEC_FIELDS: readonly string[] = ["device", "computeStream", "transferStream"];

/** Set only while adjoint() makes its operator, from the specs this one read. */
let adjointSpecs: [ResolvedSpec, ResolvedSpec] | null = null;

function resolveSpec(value: Device | DeviceSpec, role: string): ResolvedSpec {
  const spec: DeviceSpec = typeof value === "string" ? { device: value } : value;
  if (spec === null || typeof spec !== "object") throw invalidArgument(`ToDevice ${role}: expected a device or a DeviceSpec`);
  checkOptionNames(spec, SPEC_FIELDS, `ToDevice ${role}: `, "a DeviceSpec", "DeviceSpec field");
  const ordinal = resolveDevice(spec.device);
  const streams: (Stream | undefined)[] = [];
  for (const key of ["computeStream", "transferStream"] as const) {
    const stream = spec[key];
    streams.push(stream);
    if (stream === undefined) continue;
    if (!(stream instanceof Stream)) throw invalidArgument(`ToDevice ${role}: ${key} must be a Stream`);
    if (stream.deviceIndex !== ordinal) {
      throw invalidArgument(`ToDevice ${role}: ${key} belongs to ${stream.device}, not ${deviceName(ordinal)}`);
    }
  }
  return { spec, ordinal, computeStream: streams[0], transferStream: streams[1] };
}

/**
 * The identity operator: what `ToDevice.normal()` gives (a round trip to
 * another device and back is lossless). `forward` returns its input.
 */
export class Identity {
  static {
    defineInspect<Identity>(this.prototype, "Identity", () => "Identity");
  }

  /** Returns `x` itself. */
  forward<T>(x: T): T {
    return x;
  }

  /** A finished handle whose result is `x` itself. */
  forwardAsync<T>(x: T): AsyncCopyHandle<T> {
    return newHandle<T>(null, DEVICE_CPU, x);
  }

  /** Itself. */
  adjoint(): Identity {
    return this;
  }

  /** Itself. */
  normal(): Identity {
    return this;
  }
}

/**
 * Moves nested batches from one device to another through the copier:
 * `forward` moves source → target, `adjoint()` is the operator that moves
 * target → source, and `normal()` (adjoint after forward) is the
 * {@link Identity}.
 *
 * Ordering (GPU ends): the transfer goes through the pair's transfer stream
 * ({@link transferStream}): that stream first waits for the source's
 * compute stream; the copy reads the source after the work queued on the
 * transfer stream; the target's compute stream (or current stream) waits for
 * the copy; and the transfer stream then waits for the copy too, so work
 * queued on it afterwards, and `transferStream.synchronize()`, come after
 * every transfer issued so far. (The DMA itself runs on libmtc's copy
 * streams; peer access between the GPUs is enabled by libmtc on first use.)
 *
 * Leaves are not checked against the source device: host leaves and
 * DeviceTensors of any device are all copied to the target (those already
 * there are reused), as `startCopy` does.
 *
 * @example
 * ```ts
 * const compute1 = Stream.create("cuda:1");
 * const toGpu1 = new ToDevice("cuda:0", { device: "cuda:1", computeStream: compute1 });
 * const onGpu1 = toGpu1.forward(onGpu0);           // blocks until the copy is done
 * const back = await toGpu1.adjoint().forwardAsync(onGpu1); // cuda:1 → cuda:0, awaited
 * toGpu1.normal().forward(onGpu0) === onGpu0;      // true
 * ```
 */
export class ToDevice<S extends Device = Device, D extends Device = Device> {
  readonly #from: ResolvedSpec;
  readonly #to: ResolvedSpec;
  #adjoint: ToDevice<D, S> | null = null;

  static {
    // console.log: "ToDevice(cuda:0 to cuda:1)".
    defineInspect<ToDevice>(this.prototype, "ToDevice", (t) => {
      if (!(#from in t)) return "ToDevice (not made by its constructor)";
      return `ToDevice(${deviceName(t.#from.ordinal)} to ${deviceName(t.#to.ordinal)})`;
    });
  }

  /**
   * The operator from `source` to `target`: each a device name, or a
   * {@link DeviceSpec} that also names its streams. "cuda" is resolved to
   * the current device now. Throws MtcError (MTC_ERR_INVALID_ARGUMENT) for
   * a malformed device or spec (an unknown field included), or a stream of
   * another device. The spec is read once, here.
   */
  constructor(source: S | DeviceSpec<S>, target: D | DeviceSpec<D>) {
    const read = adjointSpecs;
    adjointSpecs = null;
    this.#from = read?.[0] ?? resolveSpec(source, "source");
    this.#to = read?.[1] ?? resolveSpec(target, "target");
  }

  /** The source device ("cuda" resolved to "cuda:N"). */
  get source(): Device {
    return deviceName(this.#from.ordinal);
  }

  /** The target device ("cuda" resolved to "cuda:N"). */
  get target(): Device {
    return deviceName(this.#to.ordinal);
  }

  /** The source's spec as given. */
  get sourceSpec(): DeviceSpec<S> {
    return this.#from.spec as DeviceSpec<S>;
  }

  /** The target's spec as given. */
  get targetSpec(): DeviceSpec<D> {
    return this.#to.spec as DeviceSpec<D>;
  }

  /**
   * The stream transfers of this operator are ordered on: the spec's
   * `transferStream` (the source's when it is a GPU, else the target's),
   * else the registry's for the pair, made now if needed. Null when both
   * ends are the host or the same device.
   */
  get transferStream(): Stream | null {
    return this.#transfer();
  }

  #transfer(): Stream | null {
    const from = this.#from;
    const to = this.#to;
    if (from.ordinal === to.ordinal) return null;
    const owner = from.ordinal !== DEVICE_CPU ? from : to;
    return owner.transferStream ?? streamOfPair(from.ordinal, to.ordinal);
  }

  /**
   * Moves `x` to the target and returns the moved batch, blocking the
   * thread until the copy is done (it waits for the copy only, not for
   * the streams' other work). Use {@link forwardAsync} to await instead.
   */
  forward<T>(x: T, options?: CopyOptions): Copied<T, D> {
    const handle = this.forwardAsync(x, options);
    try {
      return handle.get();
    } finally {
      handle.dispose();
    }
  }

  /**
   * Starts moving `x` to the target and returns the copy's handle at once:
   * `await` it (or `get()`), then `dispose()` it. The stream ordering is in
   * place when this returns.
   */
  forwardAsync<T>(x: T, options?: CopyOptions): AsyncCopyHandle<Copied<T, D>> {
    const from = this.#from;
    const to = this.#to;
    const target = deviceName(to.ordinal) as D;
    const transfer = this.#transfer();
    if (transfer === null) return startCopyWith(x, target, options, null);
    const streams: Stream[] = [];
    let transferWaitsForCopy = true;
    if (from.ordinal !== DEVICE_CPU) {
      const compute = from.computeStream;
      if (compute !== undefined) transfer.waitStream(compute);
      streams.push(transfer); // the copy reads the source after the transfer stream's work
      if (to.computeStream !== undefined) streams.push(to.computeStream);
    } else if (to.computeStream !== undefined) {
      streams.push(to.computeStream);
    } else {
      streams.push(transfer); // host → GPU: the transfer stream is the target's stream: it waits for the copy
      transferWaitsForCopy = false;
    }
    const handle = startCopyWith(x, target, options, streams);
    if (transferWaitsForCopy) {
      try {
        const done = handle.completionEvent();
        if (done !== null) {
          transfer.waitEvent(done);
          done.dispose();
        }
      } catch (e) {
        handle.dispose();
        throw e;
      }
    }
    return handle;
  }

  /** The operator that moves target → source (the same specs, swapped). `op.adjoint().adjoint() === op`. */
  adjoint(): ToDevice<D, S> {
    if (this.#adjoint === null) {
      adjointSpecs = [this.#to, this.#from]; // as read when this one was made, not as the caller's objects say now
      this.#adjoint = new ToDevice<D, S>(this.#to.spec as DeviceSpec<D>, this.#from.spec as DeviceSpec<S>);
      this.#adjoint.#adjoint = this;
    }
    return this.#adjoint;
  }

  /** The normal operator, adjoint ∘ forward: the identity (a round trip is lossless). */
  normal(): Identity {
    return new Identity();
  }
}
