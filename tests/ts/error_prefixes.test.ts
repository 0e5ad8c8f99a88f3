// Every error of a GPU call starts with the call's name ("Stream.create: "),
// whether the TypeScript side or the C library found it (issue 26, 13e).
import { CudaEvent, currentStream, DeviceTensor, MtcError, Module, setPinnedPoolLimit, Stream, warmUp, withStream } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertThrows, test } from "./harness.ts";

const prefixTest = (name: string, fn: () => void) => test(`error prefixes: ${name}`, fn, { skip: skipWithoutDriver });

/** Fails unless `fn` throws an MtcError whose message starts with `prefix` and includes `includes`. */
function startsWith(fn: () => unknown, prefix: string, includes: string): void {
  const e = assertThrows(fn, MtcError, includes);
  assert(e.message.startsWith(prefix), `expected the message to start with ${JSON.stringify(prefix)}: ${e.message}`);
}

prefixTest("a device the machine lacks: the same words after each call's name", () => {
  const lacks = "cuda:7 requested but this machine has 2 CUDA devices";
  startsWith(() => Stream.create("cuda:7"), "Stream.create: ", lacks);
  startsWith(() => Module.load(".version 8.0\n.target sm_90\n", "cuda:7"), "Module.load: ", lacks);
  startsWith(() => DeviceTensor.empty([2], "float32", "cuda:7"), "DeviceTensor.empty: ", lacks);
  startsWith(() => warmUp("cuda:7"), "warmUp: ", lacks);
});

prefixTest("a bad device string names the call", () => {
  startsWith(() => Stream.create("tpu" as never), "Stream.create: ", 'invalid device "tpu"');
  startsWith(() => Stream.wrap(1, "tpu" as never), "Stream.wrap: ", 'invalid device "tpu"');
  startsWith(() => Module.load("x", "tpu" as never), "Module.load: ", 'invalid device "tpu"');
  startsWith(() => DeviceTensor.zeros([1], "float32", "tpu" as never), "DeviceTensor.zeros: ", 'invalid device "tpu"');
  startsWith(() => warmUp("tpu" as never), "warmUp: ", 'invalid device "tpu"');
  startsWith(() => currentStream("tpu" as never), "currentStream: ", 'invalid device "tpu"');
  startsWith(() => setPinnedPoolLimit(1), "setPinnedPoolLimit: ", "1 MiB");
});

prefixTest("disposed streams and events name the method", () => {
  const stream = Stream.create("cuda:0");
  const event: CudaEvent = stream.recordEvent();
  event.dispose();
  startsWith(() => event.query(), "CudaEvent.query: ", "this CudaEvent was disposed");
  startsWith(() => event.synchronize(), "CudaEvent.synchronize: ", "disposed");
  startsWith(() => event.handle, "CudaEvent.handle: ", "disposed");
  startsWith(() => stream.waitEvent(event), "Stream.waitEvent: ", "disposed");
  stream.dispose();
  startsWith(() => stream.synchronize(), "Stream.synchronize: ", "this Stream (cuda:0) was disposed");
  startsWith(() => stream.recordEvent(), "Stream.recordEvent: ", "disposed");
  startsWith(() => withStream(stream, () => 1), "withStream: ", "disposed");
  startsWith(() => withStream({} as Stream, () => 1), "withStream: ", "must be a Stream");
});
