// Runs under Deno inside the scratch project of install_test.sh: errors
// thrown inside the installed package, and every frame of their stacks
// checked against the files the package holds. Deno applies a module's
// source map to its frames, so each must name a file that exists at a line
// that exists, and the line must be the one meant: the first frame's
// builds the error, each caller's calls the function of the frame above.
// (Frames that carried TypeScript line numbers against dist/mod.js passed
// the first two checks and failed the last.)
import { Arena, MtcError, startCopy, Tensor } from "multi-tensor-copier";

const deno = (globalThis as unknown as { Deno: { readTextFileSync(path: string): string; exit(code: number): never } }).Deno;

/** Errors thrown several calls deep in the library. */
function thrown(): Error[] {
  const errors: Error[] = [];
  const attempts: (() => unknown)[] = [
    () => Arena.create(1024).tensor("float32", [1000, 1000]),
    () => startCopy([{ boxes: new Tensor(new Float32Array(4), [2, 2]), bad: new Tensor(new Float32Array(2), [3]) }], "cpu"),
    () => startCopy({ a: new Float32Array(2) }, "gpu" as "cpu"),
  ];
  for (const attempt of attempts) {
    try {
      attempt();
    } catch (e) {
      if (!(e instanceof MtcError)) throw e;
      errors.push(e);
    }
  }
  if (errors.length !== attempts.length) throw new Error(`frames: ${attempts.length - errors.length} of the attempts threw nothing`);
  return errors;
}

interface Frame {
  name: string;
  file: string;
  line: number;
  column: number;
}

/** The frames of a V8 stack that name a file: URL. */
function frames(stack: string): Frame[] {
  const found: Frame[] = [];
  for (const text of stack.split("\n")) {
    const m = /^\s+at (?:(.*?) \()?(file:\/\/[^)]+):(\d+):(\d+)\)?$/.exec(text);
    if (m) found.push({ name: m[1] ?? "", file: decodeURIComponent(new URL(m[2]!).pathname), line: Number(m[3]), column: Number(m[4]) });
  }
  return found;
}

function inPackage(frame: Frame): boolean {
  return frame.file.includes("/node_modules/multi-tensor-copier/");
}

/** What a caller's line must contain to call the function a frame names: its last word. */
function callee(name: string): string {
  const word = name.replace(/^(new|async) /, "").split(".").pop()!.replace(/^#/, "");
  return word === "<anonymous>" ? "" : word;
}

const problems: string[] = [];
let checked = 0;
for (const error of thrown()) {
  const list = frames(error.stack ?? "");
  if (list.length < 2) problems.push(`${error.message}: only ${list.length} frame(s) in ${error.stack}`);
  list.forEach((frame, i) => {
    const where = `${frame.name || "(top level)"} at ${frame.file}:${frame.line}:${frame.column}`;
    let lines: string[];
    try {
      lines = deno.readTextFileSync(frame.file).split("\n");
    } catch {
      problems.push(`${where}: no such file`);
      return;
    }
    const text = lines[frame.line - 1];
    if (text === undefined) return void problems.push(`${where}: the file has ${lines.length} lines`);
    const at = text.slice(frame.column - 1);
    if (!/\w/.test(at)) return void problems.push(`${where}: line ${frame.line} is ${JSON.stringify(text.trim())}`);
    // In the package, the first frame builds the error, and a caller's line calls the frame above (or builds it: "new X(").
    const above = list[i - 1];
    const want = i === 0 ? /Error|invalidArgument|fail|throw/ : above !== undefined && callee(above.name) !== "" ? new RegExp(`\\b${callee(above.name)}\\b|\\bnew\\b`) : /./;
    if (inPackage(frame) && !want.test(text)) return void problems.push(`${where}: line ${frame.line} (${JSON.stringify(text.trim())}) does not match ${want}`);
    checked++;
  });
}
if (problems.length > 0) {
  console.log(`frames: ${problems.length} frame(s) name no real place:\n  ${problems.join("\n  ")}`);
  deno.exit(1);
}
console.log(`frames ok: ${checked} stack frames name files and lines that exist in the installed package, each the line meant`);
