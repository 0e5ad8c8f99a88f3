// The caller's code running inside a public call, on the emulated driver,
// and objects that only look like the library's: Streams and CudaEvents
// use only their private state (a redefined `handle` or `deviceIndex` is
// never read, so no code of the caller's runs between a stream's check and
// the C call that uses it), and forged ones are MtcErrors.
import { CudaEvent, currentStream, DeviceTensor, MtcError, startCopy, Stream, withStream } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const reentrancyTest = (name: string, fn: () => void | Promise<void>) =>
  test(`launch reentrancy: ${name}`, fn, { skip: skipWithoutDriver });

function floats(t: DeviceTensor): number[] {
  return Array.from(t.toHost() as Float32Array);
}

/** `new Class(...args)`, as a caller would try it on a class whose constructor is private. */
function construct(Class: unknown, ...args: unknown[]): unknown {
  return new (Class as new (...a: unknown[]) => unknown)(...args);
}

reentrancyTest("D8 (streams): forged Streams and CudaEvents are MtcErrors; new Stream and new CudaEvent are refused", () => {
  using stream = Stream.create("cuda:0");
  const invalid = (fn: () => unknown, text: string) => {
    const e = assertThrows(fn, MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  };
  const forged = Object.create(Stream.prototype) as Stream;
  invalid(() => withStream(forged, () => 1), "withStream needs a Stream");
  invalid(() => withStream(new Proxy(stream, {}), () => 1), "withStream needs a Stream");
  invalid(() => stream.waitStream(forged), "Stream.waitStream: other must be a Stream");
  invalid(() => stream.waitEvent(Object.create(CudaEvent.prototype)), "Stream.waitEvent: the event must be a CudaEvent");
  using event = stream.recordEvent();
  invalid(() => stream.waitEvent(new Proxy(event, {})), "Stream.waitEvent: the event must be a CudaEvent");
  // Each would wrap a pointer of the caller's choosing: a stream dispose() destroys, an event C releases.
  invalid(() => construct(Stream, 0, 0x1234, true), "new Stream(): a Stream is made by Stream.create or Stream.wrap");
  invalid(() => construct(CudaEvent, 0x1234), "new CudaEvent(): a CudaEvent is made by Stream.recordEvent or completionEvent()");
});

reentrancyTest("only private state is read: a Stream's redefined handle is not consulted by its own calls", () => {
  using stream = Stream.create("cuda:0");
  let called = 0;
  // A `handle` getter that disposes the stream: every call that hands the stream to C would get a destroyed one.
  Object.defineProperty(stream, "handle", { get: () => (called++, stream.dispose(), 0x1234) });
  stream.synchronize();
  using event = stream.recordEvent();
  stream.waitEvent(event);
  stream.waitStream(stream);
  stream.synchronize();
  assertSame(called, 0, "the redefined handle was never read");
  assert(!stream.disposed);
});

reentrancyTest("only private state is read: withStream's scope stays on the stream's own device", () => {
  using stream = Stream.create("cuda:0");
  Object.defineProperty(stream, "deviceIndex", { value: 1 });
  assertSame(withStream(stream, () => currentStream("cuda:0")), stream);
  assertSame(currentStream("cuda:0"), null);
  assertSame(currentStream("cuda:1"), null);
});

reentrancyTest("only private state is read: a copy inside withStream hands C the stream's own handle", () => {
  using stream = Stream.create("cuda:0");
  let called = 0;
  Object.defineProperty(stream, "handle", { get: () => (called++, stream.dispose(), 0x1234) });
  Object.defineProperty(stream, "deviceIndex", { get: () => (called++, 1) });
  using onGpu = withStream(stream, () => startCopy(new Float32Array([1, 2, 3]), "cuda:0").get());
  assertEquals(floats(onGpu), [1, 2, 3]);
  assertSame(called, 0, "the redefined fields were never read");
  assert(!stream.disposed);
});
