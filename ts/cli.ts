#!/usr/bin/env bun
/**
 * The package's command (package.json `bin`, dist/cli.js):
 *
 *     bunx multi-tensor-copier doctor
 *     deno run --allow-ffi --allow-env --allow-read node_modules/multi-tensor-copier/dist/cli.js doctor
 *
 * and from a clone, `bun ts/cli.ts doctor` or `deno run --allow-ffi
 * --allow-env --allow-read ts/cli.ts doctor`. `doctor --no-probe` leaves
 * out the bandwidth probe.
 *
 * @module
 */

import { doctor } from "./doctor.ts";
import { runtime } from "./base/runtime.ts";

interface Host {
  args: string[];
  exit(code: number): never;
}

function host(): Host {
  const g = globalThis as unknown as {
    Deno?: { args: string[]; exit(code: number): never };
    process?: { argv: string[]; exit(code: number): never };
  };
  if (runtime === "deno") return { args: g.Deno!.args, exit: (c) => g.Deno!.exit(c) };
  return { args: g.process?.argv.slice(2) ?? [], exit: (c) => g.process!.exit(c) };
}

const USAGE = `usage: multi-tensor-copier doctor [--no-probe]
  doctor      what this machine offers the library, and whether a copy to a GPU works (exit status 0) or why not (1)
  --no-probe  leave out the one-second bandwidth probe`;

const { args, exit } = host();
if (args[0] === "doctor" && args.slice(1).every((a) => a === "--no-probe")) {
  exit(await doctor((line) => console.log(line), { probe: !args.includes("--no-probe") }));
} else {
  const unknown = args[0] === "doctor" ? `unknown option: ${args.slice(1).find((a) => a !== "--no-probe")}` : `unknown command: ${args[0]}`;
  console.error(args.length === 0 || args[0] === "--help" || args[0] === "-h" ? USAGE : `${unknown}\n${USAGE}`);
  exit(args[0] === "--help" || args[0] === "-h" ? 0 : 2);
}
