/**
 * A regression check for library pinning: `deno test` runs each test file
 * in its own worker and closes the libraries a worker opened when it ends;
 * libmtc must stay mapped at the same address (its threads keep running).
 * Each file that calls this compares libmtc's base address with the one the
 * first file saw, and checks that the library's running totals (pinned
 * allocations and reuses) did not go back, as they would in a fresh copy;
 * both pass from file to file through the (process-wide) environment.
 *
 * @module
 */

import { library } from "../../ts/ffi/library.ts";
import { poolStats } from "../../ts/mod.ts";
import { assertSame, runner } from "./harness.ts";

const KEY = "MTC_TEST_LIBMTC_BASE";
const TOTALS = "MTC_TEST_LIBMTC_TOTALS";

interface EnvLike {
  get(name: string): string | undefined;
  set(name: string, value: string): void;
}

function env(): EnvLike {
  if (runner === "deno") return (globalThis as unknown as { Deno: { env: EnvLike } }).Deno.env;
  const e = (globalThis as unknown as { process: { env: Record<string, string | undefined> } }).process.env;
  return { get: (n) => e[n], set: (n, v) => void (e[n] = v) };
}

function readMaps(): string | undefined {
  try {
    if (runner === "deno") {
      return (globalThis as unknown as { Deno: { readTextFileSync(p: string): string } }).Deno.readTextFileSync("/proc/self/maps");
    }
    const fs = (import.meta as unknown as { require(id: string): { readFileSync(p: string, e: string): string } }).require("node:fs");
    return fs.readFileSync("/proc/self/maps", "utf8");
  } catch {
    return undefined; // not Linux
  }
}

/** Asserts libmtc is where the first test file that called this found it, with its state. */
export function checkLibraryStaysMapped(): void {
  const path = library().path;
  const stats = poolStats();
  const totals = stats.pinnedAllocations + stats.pinnedReuses;
  const before = Number(env().get(TOTALS) ?? 0);
  env().set(TOTALS, String(Math.max(before, totals)));
  assertSame(totals >= before, true, `libmtc's totals went back from ${before} to ${totals}: it was unloaded and loaded again`);
  const maps = readMaps();
  if (maps === undefined) return;
  const line = maps.split("\n").find((l) => l.endsWith(path) || l.includes(`${path} `));
  if (line === undefined) return;
  const base = line.split("-")[0]!;
  const first = env().get(KEY);
  if (first === undefined) env().set(KEY, base);
  else assertSame(base, first, "libmtc was unloaded and loaded again at another address");
}
