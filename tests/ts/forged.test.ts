// Objects of the library's made around addresses of the caller's choosing:
// a DeviceTensor or an Arena cannot be made with `new` (a copy would read
// or write the address, an arena would adopt the block), whatever token a
// caller or a subclass passes; the library's own ways to make them still
// work. And what the library's factories read of a DeviceTensor is its
// private state: an arena twin's block is the real one, whatever an own
// `block` property of the copy says.
import { Arena, AsyncCopyHandle, DeviceTensor, disposeAll, MtcError, startArenaCopy, startCopy } from "../../ts/mod.ts";
import { tensorBlock } from "../../ts/tensor/device_tensor.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertPoolsBack, poolMark } from "./fixtures/checks.ts";
import { assert, assertSame, assertThrows, test } from "./harness.ts";

const skip = skipWithoutDriver;

/** `new C(...args)` for a class whose constructor is private. */
function construct(C: unknown, ...args: unknown[]): unknown {
  return new (C as new (...a: unknown[]) => unknown)(...args);
}

test("forged: new DeviceTensor() is refused, with an address or a token of one's own, and from a subclass", () => {
  const made = "new DeviceTensor(): a DeviceTensor is made by the library";
  // The constructor's old positional form: an address and a size.
  assertThrows(() => construct(DeviceTensor, 0x1000, [1], "float32", 0, 4, 0, 0, false, null), MtcError, made);
  assertThrows(() => construct(DeviceTensor), MtcError, made);
  assertThrows(() => construct(DeviceTensor, Symbol("made by libmtc"), 0x1000, [1], "float32", 0, 4, 0, 0, false, null), MtcError, made);
  class Sub extends (DeviceTensor as unknown as new (...args: unknown[]) => DeviceTensor) {
    constructor() {
      super(Symbol.for("made by libmtc"), 0x1000, [1], "float32", 0, 4, 0, 0, false, null);
    }
  }
  const e = assertThrows(() => new Sub(), MtcError, made);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
});

test("forged: new Arena() is refused, with a block and an address of one's own", () => {
  assertThrows(() => construct(Arena, 0x1000, 0x2000, 4096), MtcError, "new Arena(): an Arena is made by Arena.create");
  assertThrows(() => construct(Arena, Symbol("made by libmtc"), 0x1000, 0x2000, 4096), MtcError, "made by Arena.create");
});

test("forged: new AsyncCopyHandle() is refused, around a forged plan or a token of one's own; the library's handles work as before", async () => {
  // Before: a handle around { plan: 0x1000 } passed the address to C on ready() (SIGSEGV under Bun).
  assertThrows(() => construct(AsyncCopyHandle, { plan: 0x1000 }, 0), MtcError, "new AsyncCopyHandle(): a handle is made by startCopy, copyInto or ToDevice");
  assertThrows(() => construct(AsyncCopyHandle, Symbol("made by libmtc"), { plan: 0x1000 }, 0), MtcError, "a handle is made by startCopy");
  assertThrows(() => construct(AsyncCopyHandle, null, 0, { a: 1 }), MtcError, "a handle is made by startCopy");
  const handle = startCopy({ a: new Float32Array([4, 5]) }, "cpu");
  assert(handle instanceof AsyncCopyHandle, "startCopy's handle");
  const done = await handle;
  assertSame(Array.from(done.a).join(","), "4,5");
});

test("forged: the library's own DeviceTensors are made as before: allocations, copies, arena twins", async () => {
  const mark = poolMark();
  using zeros = DeviceTensor.zeros([4], "float32", "cuda:0");
  const onGpu = await startCopy({ a: new Float32Array([1, 2, 3]) }, "cuda:1");
  assert(zeros instanceof DeviceTensor && onGpu.a instanceof DeviceTensor, "DeviceTensors");
  assertSame(Array.from(onGpu.a.toHost() as Float32Array).join(","), "1,2,3");
  disposeAll(onGpu);
  zeros.dispose();
  assertPoolsBack(mark, "made by the library");
}, { skip });

test("forged: an arena twin takes its block from the copy's private state, not from an own `block` property", async () => {
  const mark = poolMark();
  {
    using arena = Arena.create(1 << 12);
    const t = arena.tensor("float32", [4]);
    (t.data as Float32Array).set([1, 2, 3, 4]);
    using whole = await startArenaCopy(arena, "cuda:0");
    const real = tensorBlock(whole);
    Object.defineProperty(whole, "block", { value: real + 4096 }); // a field the caller's code may shadow
    using twin = arena.twin(whole, t);
    assertSame(tensorBlock(twin), real, "the twin shares the copy's real block");
    assertSame(Array.from(twin.toHost() as Float32Array).join(","), "1,2,3,4");
  }
  assertPoolsBack(mark, "twin");
}, { skip });
