/**
 * A process's first copy, with and without {@link warmUp} before it: the
 * first large copy otherwise pays for the device's setup and its pinned
 * staging buffers. Run it as a fresh process each time:
 *
 *   for i in 1 2 3 4 5; do bun bench/first_copy.ts; bun bench/first_copy.ts --warm; done
 *
 * Prints one line: the scenario, whether it warmed up (and how long that took),
 * and how long the first copy took from startCopy to get().
 *
 * @module
 */
import { disposeAll, startCopy, warmUp } from "../ts/mod.ts";
import { CommandLine, runtimeName } from "./cli.ts";
import { makeMixedBatch } from "./mixed_batch.ts";

const cli = new CommandLine(
  `usage: bun bench/first_copy.ts [--warm] [--scenario S2|S7]

  --warm       call warmUp("cuda:0") first (3 pinned buffers of 8 MiB, 256 MiB of device pool)
  --scenario   S2 (8 × 16 MiB, pageable) or S7 (mixed, 168 leaves; the default)`,
  { warm: "boolean", scenario: "string" },
);
const scenario = cli.string("scenario") ?? "S7";
if (scenario !== "S2" && scenario !== "S7") cli.fail(`--scenario: S2 or S7, not "${scenario}"`);

const floats = (bytes: number) => new Float32Array(bytes >> 2).fill(1.5);
const batch = scenario === "S2"
  ? Array.from({ length: 8 }, () => floats(16 << 20))
  : makeMixedBatch(floats);

let warmed = "no warm-up";
if (cli.flag("warm")) {
  const t0 = performance.now();
  warmUp("cuda:0", { pinnedBytes: 3 * (8 << 20), deviceBytes: 256 << 20 });
  warmed = `warm-up ${(performance.now() - t0).toFixed(2)} ms`;
}
const t0 = performance.now();
const out = startCopy(batch, "cuda:0").get();
const first = performance.now() - t0;
disposeAll(out);
console.log(`first copy ${scenario} (${runtimeName()}, ${warmed}): ${first.toFixed(3)} ms`);
