/**
 * The command line of the bench scripts, the same under Bun and Deno: the
 * arguments, `--name value` options, the runtime's name and version, exit.
 *
 * @module
 */

import { runtime } from "../ts/runtime.ts";

const g = globalThis as unknown as {
  Bun?: { argv: string[]; version: string };
  Deno?: { args: string[]; version: { deno: string }; exit(code: number): never };
  process?: { exit(code: number): never };
};

/** The script's arguments (after the script's path). */
export const args: string[] = g.Deno?.args ?? g.Bun?.argv.slice(2) ?? [];

/** The value after `name` on the command line, or undefined. */
export function option(name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/** "bun 1.x.y" or "deno 2.x.y". */
export function runtimeName(): string {
  return runtime === "bun" ? `bun ${g.Bun!.version}` : `deno ${g.Deno!.version.deno}`;
}

/** Ends the process with `code`. */
export function exit(code: number): never {
  if (g.Deno) g.Deno.exit(code);
  return g.process!.exit(code);
}
