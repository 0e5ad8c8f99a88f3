// Device strings (no library needed except for "cuda").
import { deviceName, parseDevice } from "../../ts/gpu/device.ts";
import { type Device, isDevice, MtcError, parseDevice as publicParseDevice, startCopy } from "../../ts/mod.ts";
import { assert, assertSame, assertThrows, test } from "./harness.ts";

test("device: cpu and cuda:N", () => {
  assertSame(parseDevice("cpu"), -1);
  assertSame(parseDevice("cuda:0"), 0);
  assertSame(parseDevice("cuda:7"), 7);
  assertSame(parseDevice("cuda:2147483647"), 2147483647);
  assertSame(parseDevice("cuda"), -2, "the current device, resolved by startCopy");
  assertSame(deviceName(-1), "cpu");
  assertSame(deviceName(3), "cuda:3");
});

test("device: anything else is an MtcError naming the string", () => {
  for (const bad of ["gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:1.5", "CUDA:0", " cuda:0", "cuda:0 ", "cuda:2147483648", "cpu:0", ""]) {
    const e = assertThrows(() => parseDevice(bad), MtcError, `invalid device ${JSON.stringify(bad)}`);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  }
  assertThrows(() => parseDevice(0), MtcError, "invalid device 0");
  assertThrows(() => parseDevice(undefined), MtcError, "invalid device undefined");
});

test("device: startCopy checks the device before anything else", () => {
  assertThrows(() => startCopy({ a: new Float32Array(1) }, "tpu:0" as never), MtcError, 'invalid device "tpu:0"');
});

test("device: isDevice and the public parseDevice, for device strings read at run time", () => {
  for (const good of ["cpu", "cuda", "cuda:0", "cuda:7", "cuda:2147483647"]) {
    assert(isDevice(good), good);
    const device: Device = publicParseDevice(good);
    assertSame(device, good);
  }
  for (const bad of ["gpu", "cuda:", "cuda:-1", "cuda:01", "CUDA:0", "cuda:2147483648", "", 0, null, undefined, {}, ["cpu"]]) {
    assertSame(isDevice(bad), false, String(bad));
    const e = assertThrows(() => publicParseDevice(bad), MtcError, "parseDevice: invalid device");
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  }
  // A guard narrows: no cast needed to start a copy.
  const read: unknown = "cpu";
  if (isDevice(read)) assertSame(startCopy({ a: 1 }, read).get().a, 1);
});
