/**
 * The types of a copy's result: what `startCopy(data, device)` gives back
 * for a `data` of type `T`.
 *
 * @module
 */

import type { DeviceTensor } from "../tensor/device_tensor.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { Device } from "../gpu/device.ts";

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

