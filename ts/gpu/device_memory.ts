/**
 * Device memory of its own for a tensor (`mtc_device_block_alloc`), behind
 * `DeviceTensor.empty` and `DeviceTensor.zeros`.
 *
 * @module
 */

import { DEVICE_CPU, type Device, parseDevice } from "./device.ts";
import { invalidArgument, MtcError, statusName, Status } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { cudaOrdinal } from "./stream.ts";

/** MTC_ALLOC_ZERO of mtc.h. */
const ALLOC_ZERO = 1;
/** mtc_block **out_block; mtc_block_info (32 bytes). */
const outWords = new Uint32Array(2);
const info = new DataView(new ArrayBuffer(32));
const infoBytes = new Uint8Array(info.buffer);

/** A new device block: the C reference is the caller's (block 0 and address 0 for 0 bytes). */
export interface DeviceBlock {
  ordinal: number;
  block: number;
  address: number;
}

/**
 * Allocates `bytes` bytes on `device` (zeroed with `zero`); `call` names the
 * caller in errors. The block holds one C reference, which the caller owns.
 */
export function allocateDeviceBlock(call: string, device: Device | number, bytes: number, zero: boolean): DeviceBlock {
  if (typeof device !== "number" && parseDevice(device, `${call}: `) === DEVICE_CPU) {
    throw invalidArgument(`${call}: "cpu" is no CUDA device; host tensors are made with new Tensor(data, shape, dtype)`);
  }
  const ordinal = cudaOrdinal(device, call);
  const alloc = requireSymbol("mtc_device_block_alloc", `${call}`);
  const sym = library().symbols;
  const status = alloc(ordinal, bytes, zero ? ALLOC_ZERO : 0, outWords);
  if (status !== Status.MTC_OK) {
    throw new MtcError(status, `${call}: ${sym.mtc_last_error() || statusName(status)}`);
  }
  const block = outWords[0]! + outWords[1]! * 4294967296;
  if (block === 0) return { ordinal, block, address: 0 };
  info.setUint32(0, 32, true);
  const got = sym.mtc_block_get_info(block, infoBytes);
  if (got !== Status.MTC_OK) {
    sym.mtc_block_release(block);
    throw new MtcError(got, `${call}: ${sym.mtc_last_error()}`);
  }
  return { ordinal, block, address: Number(info.getBigUint64(8, true)) };
}
