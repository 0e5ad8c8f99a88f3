// MTC_TRACE=1 prints each copy's timeline on stderr: a child process copies
// an own leaf and a packed chunk to cuda:0 through the emulated driver, and
// its stderr must hold the staging, allocation and enqueue spans of both,
// each enqueue with the time its DMA completed; without MTC_TRACE, nothing.
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertSame, test } from "./harness.ts";
import { runScript } from "./fixtures/spawn.ts";

test("trace: MTC_TRACE=1 prints the copy's timeline, and nothing without it", async () => {
  const child = new URL("./fixtures/trace_child.ts", import.meta.url).pathname;
  const traced = await runScript(child, [], { MTC_TRACE: "1" });
  assertSame(traced.code, 0, `traced child: ${traced.stderr}`);
  const lines = traced.stderr.split("\n").filter((l) => l.startsWith("mtc trace:"));
  assert(lines.some((l) => /copy of \d+ spans, enqueued/.test(l)), `a heading line:\n${traced.stderr}`);
  for (const span of [/stage leaf +0 +300000 B/, /issue leaf +0 +300000 B +done +\d/, /stage chunk +0/, /issue chunk +0 .* done +\d/, /alloc block/]) {
    assert(lines.some((l) => span.test(l)), `a span matching ${span}:\n${lines.join("\n")}`);
  }
  const quiet = await runScript(child, [], { MTC_TRACE: "0" });
  assertSame(quiet.code, 0, `untraced child: ${quiet.stderr}`);
  assert(!quiet.stderr.includes("mtc trace:"), `no trace without MTC_TRACE: ${quiet.stderr}`);
}, { skip: skipWithoutDriver, timeout: 60_000 });
