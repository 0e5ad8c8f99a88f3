/**
 * How the engine's own work scales over worker threads, with no library
 * call: 528 typed-array views, small objects or arithmetic steps a round
 * (one example batch's worth), on 1 to 12 workers at once; microseconds a
 * round per worker. Beside bench/loop_scale.ts, it tells the engine's limits
 * from the library's.
 *
 *   bun bench/engine_scale.ts     deno run bench/engine_scale.ts
 */
const MS = 1500;

for (const op of ["arithmetic", "objects", "views"]) {
  const line: string[] = [];
  for (const workers of [1, 2, 4, 8, 12]) {
    const threads = Array.from(
      { length: workers },
      () =>
        new Worker(new URL("./engine_scale_worker.ts", import.meta.url), {
          type: "module",
        }),
    );
    const rounds = await Promise.all(
      threads.map((w) =>
        new Promise<number>((resolve) => {
          w.onmessage = (event: MessageEvent) =>
            resolve((event.data as { rounds: number }).rounds);
          w.postMessage({ op, ms: MS });
        })
      ),
    );
    threads.forEach((w) => w.terminate());
    const perWorker = rounds.reduce((a, b) => a + b, 0) / workers;
    line.push(`N=${workers}: ${(MS * 1000 / perWorker).toFixed(1)} µs`);
  }
  console.log(`${op}, 528 a round, µs a round per worker: ${line.join("  ")}`);
}
