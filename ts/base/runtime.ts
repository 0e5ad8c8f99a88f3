/**
 * The little of each runtime the library needs, reached without naming
 * `Bun`, `Deno` or `process` in a way one type checker cannot resolve:
 * `tsc` (with bun-types) and `deno check` both check this code.
 *
 * @module
 */

/** Which JavaScript runtime is running us. */
export type RuntimeName = "bun" | "deno" | "other";

interface DenoEnvLike {
  env: { get(name: string): string | undefined };
}

const g = globalThis as unknown as {
  Bun?: unknown;
  Deno?: DenoEnvLike;
  process?: { env: Record<string, string | undefined> };
};

/** The runtime: "bun", "deno", or "other" (the FFI layer refuses that one). */
export const runtime: RuntimeName = g.Bun !== undefined ? "bun" : g.Deno !== undefined ? "deno" : "other";

/**
 * True inside a Deno worker. Its memory can go at any moment (`terminate()`,
 * `close()`) with no event first, so copies there stage before startCopy
 * returns (see DEFAULT_OPTIONS.useBackgroundThread).
 */
export const inDenoWorker: boolean = runtime === "deno" &&
  typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope === "function" &&
  globalThis instanceof (globalThis as unknown as { WorkerGlobalScope: new () => object }).WorkerGlobalScope;

/**
 * An environment variable, or undefined when it is unset or cannot be read
 * (Deno without --allow-env).
 */
export function getEnv(name: string): string | undefined {
  try {
    if (runtime === "deno") return g.Deno!.env.get(name);
    return g.process?.env[name];
  } catch {
    return undefined;
  }
}

/**
 * A switch in the environment, parsed as libmtc parses its own (MTC_TRACE):
 * true for 1, true, yes, on; false for 0, false, no, off (any letter case);
 * undefined when unset or anything else, which the caller treats as unset.
 */
export function envFlag(name: string): boolean | undefined {
  const value = getEnv(name)?.toLowerCase();
  if (value === "1" || value === "true" || value === "yes" || value === "on") return true;
  if (value === "0" || value === "false" || value === "no" || value === "off") return false;
  return undefined;
}

/**
 * Bun's synchronous `import.meta.require`, for built-in modules such as
 * "bun:ffi" that a static import would hide from `deno check`.
 */
export function bunRequire<T>(id: string, meta: ImportMeta): T {
  return (meta as unknown as { require(id: string): T }).require(id);
}

/** The operating system: "linux", "darwin", "windows", ... */
export function platform(): string {
  const d = g.Deno as unknown as { build?: { os?: string } } | undefined;
  if (runtime === "deno") return d?.build?.os ?? "linux";
  const p = (g.process as unknown as { platform?: string } | undefined)?.platform ?? "linux";
  return p === "win32" ? "windows" : p;
}

/**
 * Runs `fn` when this runtime may be about to free its memory, while
 * JavaScript still runs and that memory is still there. No single event
 * covers every way out, so several are listened to:
 *
 * - Bun: `process.on("exit")`, which Bun emits at the end of the script, on
 *   `process.exit()`, and after printing an uncaught error or an unhandled
 *   rejection.
 * - Deno: "unload" (the end of the script or of a worker, `Deno.exit()`,
 *   `process.exit()`), and "error" and "unhandledrejection" on globalThis:
 *   an uncaught error or rejection ends the script WITHOUT "unload", and
 *   Deno frees the heap before the process exits. These two listeners never
 *   call preventDefault, so the error is printed and the exit code stays 1;
 *   an event a listener before this one prevented (the script goes on) is
 *   left alone.
 *
 * A signal with no handler ends the process at once, freeing nothing first;
 * a handler that exits goes through the events above. libmtc's own exit
 * handler (at exit() and quick_exit()) is the last layer.
 */
export function onExit(fn: () => void): void {
  if (runtime === "deno") {
    const target = globalThis as unknown as { addEventListener(type: string, fn: (e: Event) => void): void };
    target.addEventListener("unload", fn);
    const unlessPrevented = (e: Event) => {
      if (!e.defaultPrevented) fn();
    };
    target.addEventListener("error", unlessPrevented);
    target.addEventListener("unhandledrejection", unlessPrevented);
  } else {
    (g.process as unknown as { on?(event: string, fn: () => void): void } | undefined)?.on?.("exit", fn);
  }
}

/** Lets a timer not keep the process alive (Bun: timer.unref(); Deno: Deno.unrefTimer). */
export function unrefTimer(timer: unknown): void {
  const deno = (globalThis as unknown as { Deno?: { unrefTimer?: (id: number) => void } }).Deno;
  if (deno?.unrefTimer !== undefined) deno.unrefTimer(timer as number);
  else (timer as { unref?: () => void }).unref?.();
}
