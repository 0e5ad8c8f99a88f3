/**
 * The types of a copy's result: what `startCopy(data, device)` gives back
 * for a `data` of type `T`.
 *
 * They follow what the walk does at run time: arrays, plain objects and
 * Maps are rebuilt, typed arrays and Tensors become DeviceTensors, and
 * everything else passes through by identity. One thing types cannot see:
 * whether an object is plain or a class instance (both are objects to
 * TypeScript). A class instance passes through as it is at run time, so a
 * tensor inside one stays on the host while these types say DeviceTensor;
 * the option `strict: true` refuses such a batch (an MtcError naming the
 * path), so that a copy that succeeds has the type these say. Known classes
 * (the library's own, Error, the Weak* collections, the {@link PassThrough}
 * list) are typed as passing through.
 *
 * @module
 */

import type { DeviceTensor } from "../tensor/device_tensor.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { Device } from "../gpu/device.ts";
import type { CudaEvent } from "../gpu/event.ts";
import type { Kernel, Module } from "../gpu/kernel.ts";
import type { Stream } from "../gpu/stream.ts";

export type { HostLeaf } from "../tensor/device_tensor.ts";

/** Values that pass through a copy as they are (not traversed, not copied). */
export type PassThrough =
  | ((...args: never[]) => unknown)
  | DataView
  | ArrayBuffer
  | Date
  | RegExp
  | Error
  | ReadonlySet<unknown>
  | WeakMap<WeakKey, unknown>
  | WeakSet<WeakKey>
  | WeakRef<WeakKey>
  | Promise<unknown>
  | Stream
  | CudaEvent
  | Module
  | Kernel;

/**
 * What a bare typed array comes back as from a device: the same kind (its
 * natural dtype's), except a Uint8ClampedArray, whose dtype is uint8, over
 * an ArrayBuffer (whatever buffer the source was on).
 */
export type HostArrayOf<A extends TypedArray> = A extends Uint8ClampedArray | Uint8Array ? Uint8Array<ArrayBuffer>
  : A extends Int8Array ? Int8Array<ArrayBuffer>
  : A extends Int16Array ? Int16Array<ArrayBuffer>
  : A extends Uint16Array ? Uint16Array<ArrayBuffer>
  : A extends Int32Array ? Int32Array<ArrayBuffer>
  : A extends Uint32Array ? Uint32Array<ArrayBuffer>
  : A extends BigInt64Array ? BigInt64Array<ArrayBuffer>
  : A extends BigUint64Array ? BigUint64Array<ArrayBuffer>
  : A extends Float32Array ? Float32Array<ArrayBuffer>
  : A extends Float64Array ? Float64Array<ArrayBuffer>
  : A;

/**
 * The type of `T` copied to a CUDA device: every tensor leaf becomes a
 * DeviceTensor that remembers what it comes back to the host as (a Tensor's
 * copy as a Tensor, a Float32Array's as a Float32Array).
 */
export type OnDevice<T> = T extends Tensor<infer D, infer _A> ? DeviceTensor<Tensor<D>>
  : T extends TypedArray ? DeviceTensor<HostArrayOf<T>>
  : T extends DeviceTensor<infer H> ? DeviceTensor<H>
  : T extends PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnDevice<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnDevice<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnDevice<T[K]> }
  : T;

/**
 * The type of `T` copied to the host: DeviceTensors come back as what they
 * were copied from (`DeviceTensor<H>` as `H`), host leaves stay as they are.
 */
export type OnHost<T> = T extends DeviceTensor<infer H> ? H
  : T extends TypedArray | Tensor | PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnHost<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnHost<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnHost<T[K]> }
  : T;

/**
 * The type of `T` copied to a device known only at run time (`Device`):
 * the same containers, each tensor leaf either where it was or a copy.
 */
export type OnAnyDevice<T> = T extends DeviceTensor<infer H> ? DeviceTensor<H> | H
  : T extends Tensor<infer D, infer _A> ? T | DeviceTensor<Tensor<D>>
  : T extends TypedArray ? T | DeviceTensor<HostArrayOf<T>>
  : T extends PassThrough ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, OnAnyDevice<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: OnAnyDevice<T[I]> }
  : T extends object ? { -readonly [K in keyof T]: OnAnyDevice<T[K]> }
  : T;

/**
 * The result type of copying `T` to device `D`: {@link OnHost} for "cpu",
 * {@link OnDevice} for "cuda" and "cuda:N", {@link OnAnyDevice} when `D` is
 * the whole `Device` type (a device chosen at run time). Class instances
 * are typed like plain objects but pass through at run time (see the
 * module's note, and the option `strict`).
 */
export type Copied<T, D extends Device> = [D] extends ["cpu"] ? OnHost<T>
  : "cpu" extends D ? OnAnyDevice<T>
  : OnDevice<T>;
