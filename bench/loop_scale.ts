/**
 * A loader worker's loop run by N workers at once with no consumer
 * (bench/loop_worker.ts): how each phase's median and mean per batch grow
 * with N, and how many batches the workers alone could make. Beside the
 * loader rows of bench.ts (S5wa), it tells the workers' own limit from the
 * consumer's.
 *
 *   bun bench/loop_scale.ts [count]     deno run -A bench/loop_scale.ts [count]
 */
const PHASES = ["reset", "make", "start", "move", "drop"];
const g = globalThis as { Bun?: { argv: string[] }; Deno?: { args: string[] } };
const count = Number((g.Deno?.args ?? g.Bun?.argv.slice(2) ?? [])[0] ?? 1500);

interface Row {
  medians: number[];
  means: number[];
  loop: number;
}

for (const workers of [1, 2, 4, 8]) {
  const threads = Array.from(
    { length: workers },
    () =>
      new Worker(new URL("./loop_worker.ts", import.meta.url), {
        type: "module",
      }),
  );
  const rows = await Promise.all(
    threads.map((w) =>
      new Promise<Row>((resolve) => {
        w.onmessage = (event: MessageEvent) => resolve(event.data as Row);
        w.postMessage({ count });
      })
    ),
  );
  threads.forEach((w) => w.terminate());
  const average = (pick: (r: Row) => number) =>
    rows.reduce((sum, r) => sum + pick(r), 0) / workers;
  const phases = PHASES.map((name, p) =>
    `${name} ${average((r) => r.medians[p]!).toFixed(1)} (${
      average((r) => r.means[p]!).toFixed(1)
    })`
  );
  const loop = average((r) => r.loop);
  console.log(
    `N=${workers}: median (mean) µs per batch: ${phases.join("  ")}; the loop ${
      loop.toFixed(1)
    } µs, so ${(workers * 1e6 / loop).toFixed(0)} batches/s in all`,
  );
}
