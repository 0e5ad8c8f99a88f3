/**
 * Reads one compute-sanitizer log (its --log-file) and says whether the run
 * was clean: scripts/gpu-sanitize.sh runs it after each run, with the
 * JavaScript runtime it carries, and prints the one line it prints.
 *
 *   bun scripts/sanitizer_log.ts --tool memcheck --run memcheck:c/test_device \
 *     --allow scripts/sanitizer-allow.txt --exit 0 --seconds 12 LOG
 *   deno run --allow-read scripts/sanitizer_log.ts ...      (the same)
 *   bun scripts/sanitizer_log.ts --selftest                 (sanitizer_samples.ts)
 *
 * Exits 0 when the run was clean, 1 when not, 2 on a bad command line or
 * allow-list. What counts (docs/VERIFICATION.md): every device memory error,
 * every hazard, every API error that the allow-list does not name for this
 * run, anything the tool says went wrong with itself, a missing summary, a
 * non-zero exit and a timeout.
 *
 * @module
 */

import { readFileSync } from "node:fs";
import { SAMPLES } from "./sanitizer_samples.ts";

/** One line of the allow-list: an API error that some runs cause on purpose. */
export interface AllowEntry {
  api: string;
  error: string;
  /** A glob over run names ("memcheck:gpu/kernels.test.ts", "*:gpu/*", "*"). */
  runs: string;
  line: number;
}

/** A "Program hit ... on CUDA API call to ..." record. */
export interface ApiError {
  api: string;
  error: string;
}

/** What one log says. */
export interface LogReport {
  /** Sessions seen (COMPUTE-SANITIZER banners). */
  sessions: number;
  /** ERROR SUMMARY lines, and the errors they add up to. */
  errorSummaries: number;
  errorsReported: number;
  /** RACECHECK SUMMARY lines, and the hazards they add up to (errors and warnings). */
  raceSummaries: number;
  hazardsReported: number;
  /** Race reports printed (analysis or hazard form). */
  raceRecords: string[];
  /** API errors printed, in order. */
  apiErrors: ApiError[];
  /** Other error records printed: memory access errors, hardware exceptions, leaks. */
  deviceErrors: string[];
  /** What the tool says about itself failing (no attachable process, internal errors). */
  toolErrors: string[];
  /** Its warnings and notes about itself: shown, not counted. */
  notes: string[];
}

/** The verdict on one run. */
export interface Verdict {
  ok: boolean;
  /** Errors counted: those not in the allow-list, including any the log reports but does not show. */
  counted: number;
  /** Allowed API errors, by "api error". */
  expected: Map<string, number>;
  hazards: number;
  /** The one line for the run's summary. */
  line: string;
}

const PREFIX = "=========";
const SESSION_DETAILS = /^(Process ID|Created|System OS|OS build|System CPU|CPU architecture|Computer Name|Target application|CUDA version|Display Driver version):/;
const TOOLS = ["memcheck", "racecheck", "synccheck", "initcheck"];

/** "cuMemAlloc_v2" and "cuLaunchKernel_ptsz" name the calls "cuMemAlloc" and "cuLaunchKernel". */
export function baseApiName(api: string): string {
  return api.replace(/_(ptsz|ptds)$/, "").replace(/_v\d+$/, "");
}

/**
 * Parses the allow-list: `API ERROR RUNS` per line, `#` comments and blank
 * lines ignored. Throws, naming the line, on anything else.
 */
export function parseAllowList(text: string): AllowEntry[] {
  const entries: AllowEntry[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") return;
    const words = line.split(/\s+/);
    if (words.length !== 3 || !/^cu[A-Za-z0-9_]+$/.test(words[0]!) || !/^CUDA_ERROR_[A-Z0-9_]+$/.test(words[1]!)) {
      throw new Error(`allow-list line ${i + 1}: expected "cuName CUDA_ERROR_NAME RUNS", got ${JSON.stringify(raw.trim())}`);
    }
    entries.push({ api: baseApiName(words[0]!), error: words[1]!, runs: words[2]!, line: i + 1 });
  });
  return entries;
}

function globMatches(glob: string, name: string): boolean {
  const pattern = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${pattern}$`).test(name);
}

/** Whether the allow-list names `e` for the run `run`. */
export function isAllowed(e: ApiError, run: string, allow: AllowEntry[]): boolean {
  const api = baseApiName(e.api);
  return allow.some((a) => a.api === api && a.error === e.error && globMatches(a.runs, run));
}

/** The record lines of the log: the text after the prefix, and whether it starts a record. */
function records(log: string): { text: string; top: boolean }[] {
  const out: { text: string; top: boolean }[] = [];
  for (const raw of log.split(/\r?\n/)) {
    if (!raw.startsWith(PREFIX)) continue;
    const rest = raw.slice(PREFIX.length);
    const text = rest.trim();
    if (text === "") continue;
    out.push({ text, top: rest.length - rest.trimStart().length <= 1 });
  }
  return out;
}

const PROGRAM_HIT = /^Program hit (?:(CUDA_ERROR_[A-Z0-9_]+|cudaError[A-Za-z0-9_]+) \(error (\d+)\)|error (\d+))(?: due to ".*?")? on CUDA API call(?: to ([A-Za-z0-9_]+))?\.?/;

/** Reads a compute-sanitizer log. */
export function readLog(log: string): LogReport {
  const r: LogReport = {
    sessions: 0,
    errorSummaries: 0,
    errorsReported: 0,
    raceSummaries: 0,
    hazardsReported: 0,
    raceRecords: [],
    apiErrors: [],
    deviceErrors: [],
    toolErrors: [],
    notes: [],
  };
  const lines = records(log);
  for (let i = 0; i < lines.length; i++) {
    const { text, top } = lines[i]!;
    if (!top) continue;
    let m: RegExpMatchArray | null;
    if (text === "COMPUTE-SANITIZER") r.sessions++;
    else if ((m = text.match(/^ERROR SUMMARY: (\d+) errors?/))) {
      r.errorSummaries++;
      r.errorsReported += Number(m[1]);
    } else if ((m = text.match(/^RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)/))) {
      r.raceSummaries++;
      r.hazardsReported += Number(m[1]);
    } else if (/^LEAK SUMMARY:/.test(text)) {
      // The leaks themselves are records of their own, and in ERROR SUMMARY.
    } else if (text.startsWith("Program hit")) {
      // A long record may wrap: read on until the API call is named.
      let full = text;
      for (let j = i + 1; !/on CUDA API call/.test(full) && j < lines.length && !lines[j]!.top; j++) full += ` ${lines[j]!.text}`;
      m = full.match(PROGRAM_HIT);
      r.apiErrors.push(m === null ? { api: "?", error: full } : { api: m[4] ?? "?", error: m[1] ?? `error ${m[3]}` });
    } else if (/^(Error|Warning): Race reported between/.test(text) || /\bhazard detected\b/.test(text)) {
      r.raceRecords.push(text);
    } else if (/^(Error: )?Target application terminated before first instrumented (API call|kernel launch)/.test(text)) {
      // A process that never used CUDA (a child, with --require-cuda-init no): nothing to check.
      if (text.startsWith("Error: ")) r.toolErrors.push(text);
    } else if (text.startsWith("Error:") || /^Internal Sanitizer/.test(text)) r.toolErrors.push(text);
    else if (/^(Warning|Note|Info):/.test(text)) r.notes.push(text);
    else if (!SESSION_DETAILS.test(text)) r.deviceErrors.push(text);
  }
  return r;
}

/** "a ×2; b" for [a, b, a]: the first five kinds, then how many more. */
function tally(items: string[]): string {
  const counts = new Map<string, number>();
  for (const s of items) counts.set(s, (counts.get(s) ?? 0) + 1);
  const kinds = [...counts].map(([s, n]) => (n > 1 ? `${s} ×${n}` : s));
  return kinds.slice(0, 5).join("; ") + (kinds.length > 5 ? `; and ${kinds.length - 5} more kinds (see the log)` : "");
}

/** The run's options as gpu-sanitize.sh passes them. */
export interface RunInfo {
  tool: string;
  run: string;
  exitCode: number;
  seconds?: number;
  timedOut?: boolean;
}

/** Judges one run from its log, the allow-list and how the process ended. */
export function judge(report: LogReport, info: RunInfo, allow: AllowEntry[]): Verdict {
  const expected = new Map<string, number>();
  const unexpected: string[] = [];
  for (const e of report.apiErrors) {
    const key = `${baseApiName(e.api)} ${e.error}`;
    if (isAllowed(e, info.run, allow)) expected.set(key, (expected.get(key) ?? 0) + 1);
    else unexpected.push(`${e.api} ${e.error}`);
  }
  const allowed = [...expected.values()].reduce((a, b) => a + b, 0);
  const shown = unexpected.length + report.deviceErrors.length;
  // The summary counts every error, shown or not: what it has beyond the allowed ones counts.
  const counted = Math.max(shown, report.errorsReported - allowed);
  const hazards = Math.max(report.hazardsReported, report.raceRecords.length);
  const problems: string[] = [];
  if (info.timedOut) problems.push("timed out");
  else if (info.exitCode !== 0) problems.push(`the tests failed (exit ${info.exitCode})`);
  if (counted > 0) {
    const what = tally([...report.deviceErrors, ...unexpected]);
    const unshown = counted - shown;
    problems.push(`${counted} error${counted === 1 ? "" : "s"}: ${what}${unshown > 0 ? `${what ? "; " : ""}${unshown} not shown in the log` : ""}`);
  }
  if (hazards > 0) {
    const first = report.raceRecords[0];
    problems.push(`${hazards} hazard${hazards === 1 ? "" : "s"}${first !== undefined ? ` (${first} ...)` : ""}`);
  }
  if (report.toolErrors.length > 0) problems.push(`the sanitizer: ${tally(report.toolErrors)}`);
  const summaries = info.tool === "racecheck" ? report.raceSummaries : report.errorSummaries;
  if (summaries === 0 && !info.timedOut) problems.push(`no ${info.tool === "racecheck" ? "RACECHECK" : "ERROR"} SUMMARY in the log (the sanitizer did not finish)`);
  const ok = problems.length === 0;
  const ignored = [...expected].map(([k, n]) => `${k} ×${n}`).join(", ");
  const took = info.seconds !== undefined ? `, ${info.seconds} s` : "";
  const line = `sanitize ${info.run}: exit ${info.timedOut ? "timeout" : info.exitCode}${took}; ` +
    `errors ${counted} counted, ${allowed} expected ignored${ignored ? ` (${ignored})` : ""}; ` +
    `hazards ${info.tool === "racecheck" ? hazards : "-"}: ${ok ? "ok" : `FAILED: ${problems.join("; ")}`}` +
    (report.notes.length > 0 ? ` (the sanitizer's notes: ${tally(report.notes)})` : "");
  return { ok, counted, expected, hazards, line };
}

// ------------------------------------------------------------- command line

/** Runs SAMPLES against `allow`; the problems found. */
export function selfTest(allow: AllowEntry[]): string[] {
  const problems: string[] = [];
  for (const s of SAMPLES) {
    const v = judge(readLog(s.log), { tool: s.tool, run: s.run, exitCode: s.exitCode }, allow);
    const allowed = [...v.expected.values()].reduce((a, b) => a + b, 0);
    const got = { ok: v.ok, counted: v.counted, allowed, hazards: v.hazards };
    const want = { ok: s.ok, counted: s.counted, allowed: s.allowed, hazards: s.hazards };
    if (JSON.stringify(got) !== JSON.stringify(want)) problems.push(`${s.name}: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)} (${v.line})`);
  }
  return problems;
}

function main(args: string[]): number {
  const value = (name: string): string | undefined => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const allowPath = value("allow") ?? new URL("./sanitizer-allow.txt", import.meta.url).pathname;
  let allow: AllowEntry[];
  try {
    allow = parseAllowList(readFileSync(allowPath, "utf8"));
  } catch (e) {
    console.log(`sanitizer_log: ${allowPath}: ${e instanceof Error ? e.message : String(e)}`);
    return 2;
  }
  if (args.includes("--selftest")) {
    const problems = selfTest(allow);
    for (const p of problems) console.log(`sanitizer_log self-test: ${p}`);
    console.log(`sanitizer_log self-test: ${SAMPLES.length - problems.length} of ${SAMPLES.length} sample logs judged as expected (${allow.length} allow-list entries)`);
    return problems.length === 0 ? 0 : 1;
  }
  const tool = value("tool");
  const run = value("run");
  const exit = Number(value("exit"));
  const log = args[args.length - 1];
  if (tool === undefined || !TOOLS.includes(tool) || run === undefined || !Number.isInteger(exit) || log === undefined || log.startsWith("--")) {
    console.log("usage: sanitizer_log.ts --tool memcheck|racecheck --run NAME --exit CODE [--seconds S] [--timed-out] [--allow FILE] LOG | --selftest");
    return 2;
  }
  let text = "";
  try {
    text = readFileSync(log, "utf8");
  } catch {
    // No log at all: judged below as a run without a summary.
  }
  const seconds = value("seconds");
  const v = judge(readLog(text), { tool, run, exitCode: exit, seconds: seconds === undefined ? undefined : Number(seconds), timedOut: args.includes("--timed-out") }, allow);
  console.log(v.line);
  return v.ok ? 0 : 1;
}

if (import.meta.main) {
  const g = globalThis as unknown as { Deno?: { args: string[]; exit(code: number): never }; process?: { argv: string[]; exit(code: number): never } };
  const code = main(g.Deno?.args ?? g.process!.argv.slice(2));
  if (g.Deno) g.Deno.exit(code);
  else g.process!.exit(code);
}
