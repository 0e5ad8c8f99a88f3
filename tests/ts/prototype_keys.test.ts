// Keys that assignment would hand to Object.prototype: a setter someone added
// there (which would take the value), keys a frozen Object.prototype holds
// read-only ("constructor", "toString": assignment throws), and "__proto__".
// Every copy and every take makes them own keys of the result, with the
// sender's values. The frozen case runs in a child process (freezing cannot
// be undone). Emulated driver.
import { skipWithoutDriver } from "./fake_driver.ts";
import { everyPath } from "./fixtures/prototype_paths.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assertEquals, assertSame, test } from "./harness.ts";

const protoTest = (name: string, fn: () => void | Promise<void>) => test(`prototype keys: ${name}`, fn, { skip: skipWithoutDriver });

const EXPECTED = Array.from({ length: 6 }, () => ["own leaf", "value"]).flat();

protoTest("a setter on Object.prototype takes nothing: every copy and take keeps the key", async () => {
  let calls = 0;
  Object.defineProperty(Object.prototype, "meta", {
    set(_value) {
      calls++;
    },
    get() {
      return "the prototype's";
    },
    configurable: true,
  });
  try {
    assertEquals(await everyPath("meta"), EXPECTED);
    assertSame(calls, 0, "the setter was never called");
  } finally {
    delete (Object.prototype as Record<string, unknown>).meta;
  }
});

protoTest("a frozen Object.prototype: keys it holds are own keys of each result, no TypeError", async () => {
  const child = new URL("./fixtures/frozen_prototype.ts", import.meta.url).pathname;
  const r = await runScript(child, [], {});
  assertSame(r.code, 0, r.stderr);
  assertEquals(JSON.parse(r.stdout.trim().split("\n").at(-1)!), { constructor: EXPECTED, toString: EXPECTED });
});
