// MTC_TRACE_FILE writes each copy's timeline in the Trace Event Format
// (the JSON Perfetto and chrome://tracing open): a child process copies the
// example batch to cuda:0 and back through the emulated driver, and the
// file must parse, hold every kind of event of those copies, each thread's
// events in order, each DMA and kernel on its device's stream after it was
// issued.
import { readdirSync, readFileSync } from "node:fs";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertSame, runner, test } from "./harness.ts";
import { runScript } from "./fixtures/spawn.ts";

const child = new URL("./fixtures/trace_file_child.ts", import.meta.url).pathname;

/** Every kind ("cat") a copy to a device and back must leave in the file. */
const KINDS = ["copy", "plan", "alloc", "stage", "issue", "dma", "launch", "kernel", "note", "wait"];

interface TraceEvent {
  ph: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  name: string;
  s?: string;
  args?: Record<string, unknown>;
}

/** deno test runs without --allow-write: `rm` (with --allow-run) removes the file there. */
async function remove(path: string): Promise<void> {
  if (runner === "bun") {
    (await import("node:fs")).rmSync(path, { force: true });
    return;
  }
  const deno = (globalThis as unknown as { Deno: { Command: new (c: string, o: object) => { output(): Promise<unknown> } } }).Deno;
  await new deno.Command("rm", { args: ["-f", path] }).output();
}

test("trace file: MTC_TRACE_FILE holds every event of a copy, in Trace Event Format, in order per thread", async () => {
  // "%p": the child's process id, so the file is found by the rest of its name.
  const base = `mtc-trace-${runner}-${Date.now()}-${Math.floor(Math.random() * 1e9)}-`;
  let path = "";
  try {
    const result = await runScript(child, [], { MTC_TRACE_FILE: `/tmp/${base}%p.json` });
    assertSame(result.code, 0, `traced child: ${result.stderr}`);
    const written = readdirSync("/tmp").filter((name) => name.startsWith(base));
    assertSame(written.length, 1, `one file: ${written.join(", ")}`);
    assert(/^\d+\.json$/.test(written[0]!.slice(base.length)), `%p became a process id: ${written[0]}`);
    path = `/tmp/${written[0]}`;
    assert(!result.stderr.includes("mtc trace:"), `MTC_TRACE_FILE alone prints nothing on stderr: ${result.stderr}`);
    const file = JSON.parse(readFileSync(path, "utf8")) as { traceEvents: TraceEvent[] };
    assert(Array.isArray(file.traceEvents), "a JSON object with a traceEvents array");
    const events = file.traceEvents;
    for (const e of events) {
      assert(["X", "M", "i"].includes(e.ph), `a phase the format knows: ${JSON.stringify(e)}`);
      assert(Number.isInteger(e.pid) && Number.isInteger(e.tid) && typeof e.name === "string", `pid, tid and name: ${JSON.stringify(e)}`);
      if (e.ph !== "M") assert(typeof e.ts === "number" && e.ts > 0, `a time: ${JSON.stringify(e)}`);
      if (e.ph === "X") assert(typeof e.dur === "number" && e.dur >= 0, `a duration: ${JSON.stringify(e)}`);
    }
    const present = new Set(events.map((e) => e.cat).filter((c) => c !== undefined));
    for (const kind of KINDS) assert(present.has(kind), `events of kind "${kind}" (found: ${[...present].join(", ")})`);

    // Every thread and track is named, and its events come in time order.
    const named = new Set(events.filter((e) => e.ph === "M" && e.name === "thread_name").map((e) => e.tid));
    const byTrack = Map.groupBy(events.filter((e) => e.ph !== "M"), (e) => e.tid);
    for (const [tid, list] of byTrack) {
      assert(named.has(tid), `thread or track ${tid} has a thread_name`);
      const copies = list.filter((e) => e.cat === "copy");
      // A copy's own spans follow it in order; the caller's waits come after it began.
      for (let i = 1; i < list.length; i++) {
        if (list[i]!.cat === "copy" || list[i]!.cat === "wait" && list[i]!.name === "wait for copy") continue;
        assert(list[i]!.ts! >= list[i - 1]!.ts!, `track ${tid}: ${list[i]!.name} at ${list[i]!.ts} after ${list[i - 1]!.name} at ${list[i - 1]!.ts}`);
      }
      for (const copy of copies) {
        const inside = list.filter((e) => e.ts! >= copy.ts! && e.ts! <= copy.ts! + copy.dur! && e !== copy && e.args?.thread === copy.tid);
        assert(inside.length > 0 && inside.every((e) => ["alloc", "stage", "issue", "launch", "wait"].includes(e.cat!)), `${copy.name}: its steps`);
        assertSame(inside.at(-1)?.name, "wait traced", `${copy.name}: the trace's own wait comes last`);
        // Planned (on the submitting thread) before it ran.
        const plan = events.find((e) => e.cat === "plan" && e.ts! + e.dur! <= copy.ts! && e.ts! === copy.args!.submitted);
        assertSame(plan?.args!.leaves, copy.args!.leaves, `${copy.name}: its planning`);
      }
    }

    // The three copies: to cuda:0 (528 leaves, 153,628 bytes), back, and into the first's tensors.
    const copies = events.filter((e) => e.cat === "copy");
    assertSame(copies.map((c) => `${c.name} ${c.args!.leaves} ${c.args!.bytes}`).join("; "), "copy to cuda:0 528 153628; copy to cpu 528 153628; copy to cuda:0 528 153628");
    // Each DMA and kernel issued by a thread ran on cuda:0's stream once issued, with its bytes.
    const issued = events.filter((e) => e.cat === "issue" || e.cat === "launch");
    const ran = events.filter((e) => e.cat === "dma" || e.cat === "kernel");
    assertSame(ran.length, issued.length, "one GPU span per DMA and launch");
    const streams = new Set(ran.map((e) => e.tid));
    assertSame(streams.size, 1, "one copy stream");
    assert(!byTrack.get([...streams][0]!)!.some((e) => e.cat !== "dma" && e.cat !== "kernel"), "only GPU work on the stream's track");
    ran.forEach((gpu, i) => {
      const host = issued[i]!;
      assertSame(gpu.args!.bytes, host.args!.bytes, `${gpu.name}: the bytes of ${host.name}`);
      assert(gpu.ts! >= host.ts!, `${gpu.name} began after ${host.name} was called`);
    });
    const kernels = ran.filter((e) => e.cat === "kernel");
    assertSame(kernels.map((k) => `${k.name} ${k.args!.leaves}`).join("; "), "kernel gather 528; kernel scatter 528", "the gather and scatter kernels, with their leaves");
    assert(events.some((e) => e.cat === "note" && e.name.includes("packed leaves by one gather launch")), "the note saying which path");
    assert(events.some((e) => e.name === "wait for copy"), "the caller's wait");
  } finally {
    if (path !== "") await remove(path);
  }
}, { skip: skipWithoutDriver, timeout: 60_000 });

test("trace file: a file that cannot be written says why on stderr, once, and the copies go on", async () => {
  const cases: [string, string][] = [
    ["/tmp/mtc-no-such-folder/trace.json", "No such file or directory"],
    ["/dev/full", "No space left on device"],
    [`/tmp/${"a".repeat(5000)}.json`, "the path is longer than 4095 bytes"],
  ];
  for (const [path, why] of cases) {
    const result = await runScript(child, [], { MTC_TRACE_FILE: path });
    assertSame(result.code, 0, `the copies went on: ${result.stderr}`);
    assert(result.stdout.includes("copied"), `copied: ${result.stdout}`);
    const lines = result.stderr.split("\n").filter((l) => l.startsWith("mtc trace:"));
    assertSame(lines.length, 1, `one line: ${result.stderr}`);
    assert(lines[0]!.includes("cannot write MTC_TRACE_FILE") && lines[0]!.includes(why) && lines[0]!.endsWith("tracing to it is off"), lines[0]!);
  }
}, { skip: skipWithoutDriver, timeout: 60_000 });
