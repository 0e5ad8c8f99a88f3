/**
 * The command line of the bench scripts, the same under Bun and Deno: the
 * options (parsed by node:util's parseArgs, which both runtimes have), the
 * runtime's name and version, exit.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { runtime } from "../ts/base/runtime.ts";

const g = globalThis as unknown as {
  Bun?: { argv: string[]; version: string };
  Deno?: { args: string[]; version: { deno: string }; exit(code: number): never };
  process?: { exit(code: number): never };
};

/**
 * A script's options. `--help` prints the usage and exits 0; an unknown
 * option, an argument that is not an option, or a missing value prints the
 * mistake and the usage and exits 2.
 */
export class CommandLine {
  readonly #usage: string;
  readonly #values: Record<string, string | boolean | undefined>;

  /** `options` maps each option's name (without --) to whether it takes a value. */
  constructor(usage: string, options: Record<string, "string" | "boolean">) {
    this.#usage = usage;
    const spec: Record<string, { type: "string" | "boolean" }> = { help: { type: "boolean" } };
    for (const [name, type] of Object.entries(options)) spec[name] = { type };
    try {
      const args = g.Deno?.args ?? g.Bun?.argv.slice(2) ?? [];
      this.#values = parseArgs({ args, options: spec, allowPositionals: false, strict: true }).values;
    } catch (e) {
      this.fail((e as Error).message);
    }
    if (this.#values.help === true) {
      console.log(usage);
      exit(0);
    }
  }

  /** The value of `--name VALUE` (or `--name=VALUE`), or undefined. */
  string(name: string): string | undefined {
    const v = this.#values[name];
    return typeof v === "string" ? v : undefined;
  }

  /** Whether `--name` was given. */
  flag(name: string): boolean {
    return this.#values[name] === true;
  }

  /** A whole number from `min` to `max`, or `fallback` when the option is absent. */
  count(name: string, fallback: number, min: number, max = 1e9): number {
    const text = this.string(name);
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!/^[0-9]+$/.test(text) || n < min || n > max) this.fail(`--${name} wants a whole number from ${min} to ${max}, not "${text}"`);
    return n;
  }

  /** Prints `message` and the usage on stderr, and exits 2. */
  fail(message: string): never {
    console.error(`${message}\n\n${this.#usage}`);
    return exit(2);
  }
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
