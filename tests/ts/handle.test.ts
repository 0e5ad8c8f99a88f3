// AsyncCopyHandle states for copies that need no device (everything on the host).
import { AsyncCopyHandle, MtcError, startCopy } from "../../ts/mod.ts";
import { assert, assertRejects, assertSame, assertThrows, test } from "./harness.ts";

const batch = () => ({ a: [new Float32Array(4), 1], b: "x" });

test("handle: ready, get returns the same object every time", () => {
  const h = startCopy(batch(), "cpu");
  assert(h instanceof AsyncCopyHandle);
  assertSame(h.ready(), true);
  const first = h.get();
  assertSame(h.get(), first);
});

test("handle: await gives the same result as get", async () => {
  const h = startCopy(batch(), "cpu");
  const awaited = await h;
  assertSame(awaited, h.get());
  assertSame(await h, awaited);
  const chained = await h.then((v) => v.b);
  assertSame(chained, "x");
});

test("handle: dispose is idempotent; get after dispose throws INVALID_STATE", async () => {
  const h = startCopy(batch(), "cpu");
  h.dispose();
  h.dispose();
  h[Symbol.dispose]();
  const e = assertThrows(() => h.get(), MtcError, "this AsyncCopyHandle was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  assertSame(e.status, 3);
  assertSame(h.ready(), true, "nothing is in flight any more");
  await assertRejects(() => h, MtcError, "disposed");
});

test("handle: get, then dispose, then get throws", () => {
  const h = startCopy(batch(), "cpu");
  const out = h.get();
  h.dispose();
  assertThrows(() => h.get(), MtcError, "disposed");
  assertSame(out.b, "x", "outputs handed out stay valid");
});

test("handle: `using` disposes at the end of the block", () => {
  let kept: AsyncCopyHandle<unknown>;
  {
    using h = startCopy(batch(), "cpu");
    kept = h;
    h.get();
  }
  assertThrows(() => kept.get(), MtcError, "disposed");
});
