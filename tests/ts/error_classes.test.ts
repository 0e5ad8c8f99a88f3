// Errors that cross threads keep their class: a moved TypeError, RangeError,
// DOMException (with its name) or AggregateError arrives as one, so that
// `e instanceof TypeError` holds on the receiving side; a class of the
// caller's keeps its name, message and stack, and the built-in class it
// extends. Both ways an error crosses: moveResult and takeResult, and a
// loader's producer that throws.
import { disposeAll, isMoved, type Moved, moveResult, MtcError, startLoader, takeResult } from "../../ts/mod.ts";
import { hasOwners } from "../../ts/ffi/owner.ts";
import { fakeDriver, skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertRejects, assertSame, assertThrows, note, test } from "./harness.ts";
import { builtinClass, CLASSED } from "./fixtures/error_classes.ts";

const skip = skipWithoutDriver ??
  (fakeDriver() === null ? "needs the emulated driver" : undefined) ??
  (!hasOwners() ? "this libmtc has no owners (mtc/owner.h): results cannot move between threads" : undefined);
if (skip !== undefined) note(`error class tests skipped: ${skip}`);

/** `got` is what `sent` should arrive as: its class, name, message and stack. */
function checkArrived(got: unknown, sent: Error, kind: string, builtin: string, name: string, stackHas: string): void {
  assert(got instanceof builtinClass(builtin), `${kind}: an instance of ${builtin}: ${String(got)} (${Object.prototype.toString.call(got)})`);
  const e = got as Error;
  assertSame(e.name, name, `${kind}: its name`);
  assertSame(e.message, sent.message, `${kind}: its message`);
  assert(String(e.stack).includes(stackHas), `${kind}: the sender's stack: ${e.stack}`);
  if (builtin === "DOMException") assertSame((e as DOMException).code, (sent as DOMException).code, `${kind}: its legacy code`);
}

test("error classes: moveResult and takeResult keep an error's built-in class, and a caller's class its name, message and stack", () => {
  for (const [kind, { make, builtin, name }] of Object.entries(CLASSED)) {
    const sent = make();
    // Structured cloning, as postMessage does, between the two.
    const got = takeResult(structuredClone(moveResult(sent)));
    checkArrived(got, sent, kind, builtin, name, String(sent.stack));
    assert(!(got instanceof MtcError), `${kind}: not an MtcError`);
  }
}, { skip });

test("error classes: a message whose error names no built-in class is refused as damaged", () => {
  for (const builtin of ["Function", "MtcError", 7, "__proto__"]) {
    const moved = structuredClone(moveResult(new TypeError("x"))) as unknown as { error: Record<string, unknown> };
    moved.error.builtin = builtin;
    assert(isMoved(moved), "still a message");
    assertThrows(() => takeResult(moved as unknown as Moved), MtcError, "not a built-in error class");
  }
}, { skip });

test("error classes: a loader's producer that throws a TypeError, a DOMException or a class of its own: the consumer gets that class", async () => {
  // Four kinds (each loader costs Deno a type check of its worker); the first test has them all.
  for (const kind of ["typeError", "abort", "diskFull", "shardMissing"]) {
    const { make, builtin, name } = CLASSED[kind]!;
    const loader = startLoader<{ index: number }>({
      module: new URL("./fixtures/error_classes.ts", import.meta.url),
      export: "throwingClassed",
      device: "cuda:0",
      workers: 1,
      args: { at: 1, kind },
    });
    const first = await loader.next();
    assert(first.done !== true && first.value.index === 0, `${kind}: batch 0 came first`);
    disposeAll(first.value);
    const e = await assertRejects(() => loader.next(), Error);
    checkArrived(e, make(), kind, builtin, name, "at batch 1 in loader worker 0");
    // (Bun's DOMException has no frames of its own.)
    if (builtin !== "DOMException") assert(String(e.stack).includes("error_classes.ts"), `${kind}: the producer's frames: ${e.stack}`);
    await loader.close();
  }
}, { skip, timeout: 120_000 });
