#!/usr/bin/env python3
"""Type-checks the TypeScript examples in the doc comments of ts/ (every
```ts block inside a /** ... */ comment) as the README's blocks are checked
(scripts/check_readme_ts.sh): each block a module of its own, checked by tsc
under the tsconfig that `bun init` writes (strict, noUncheckedIndexedAccess)
and by `deno check`.

A block reads as the documentation of its declaration: the names it uses
from the package (mod.ts's exports), and for an internal module's block that
module's own exports, are imported for it, as `deno test --doc` does; a block
that imports a name itself keeps its own import ("multi-tensor-copier" is
this checkout's ts/mod.ts). The few names blocks use without defining them
(batch, arena, train(), ...) are declared in a prelude.

--selftest: checks that a wrong example (a Float32Array filled with a
bigint) fails the check, and that its message names the file.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TSC = os.path.join(ROOT, "node_modules/.bin/tsc")
DENO = os.path.join(ROOT, "node_modules/.bin/deno")
MOD = os.path.join(ROOT, "ts/mod.ts")

PRELUDE = """// What the doc comments' examples use without defining it.
type Mtc = typeof import("{mod}");
declare const batch: {{ boxes: import("{mod}").Tensor<"float32">; ids: Int32Array; name: string }}[];
declare const batches: (typeof batch)[];
declare const steps: {{ ids: Int32Array<ArrayBuffer>; pos: Int32Array<ArrayBuffer> }}[];
declare const myBoxes: Float32Array;
declare const ptxText: string;
declare const onGpu: import("{mod}").DeviceTensor<Float32Array<ArrayBuffer>>;
declare const onGpu0: import("{mod}").DeviceTensor<import("{mod}").Tensor<"float32">>;
declare const arena: import("{mod}").Arena;
declare const handle: import("{mod}").AsyncCopyHandle<unknown>;
declare const stream: import("{mod}").Stream;
declare const otherStream: import("{mod}").Stream;
declare const otherLibrary: {{ streamWaitEvent(stream: unknown, event: number): void }};
declare const config: {{ device: unknown }};
declare const args: string[];
declare const worker: Worker;
declare const address: number;
declare const error: unknown;
declare const addressFromOtherLibrary: number;
type Batch = {{ x: Float32Array }};
declare function loader(): AsyncIterable<{{ x: Float32Array; name: string }}>;
declare function train(batch: unknown): void;
declare function runGraph(buffers: unknown): void;
declare function doOtherWork(): void;
declare function useCpu(): void;
declare function postMessage(message: unknown): void; // a worker's
"""

# bun init's tsconfig.json (Bun 1.4), shared with scripts/check_readme_ts.sh.
TSCONFIG_TEMPLATE = os.path.join(ROOT, "scripts", "bun_init_tsconfig.json")


def doc_blocks(text):
    """The ```ts blocks inside /** */ comments of `text`: (first line number, code)."""
    blocks, in_doc, code, start = [], False, None, 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not in_doc:
            if stripped.startswith("/**"):
                in_doc = True
            else:
                continue
        body = re.sub(r"^\s*\*? ?", "", line) if not stripped.startswith("/**") else ""
        if code is None and body.strip() == "```ts":
            code, start = [], number + 1
        elif code is not None and body.strip() == "```":
            blocks.append((start, "\n".join(code) + "\n"))
            code = None
        elif code is not None:
            code.append(body)
        if "*/" in stripped:
            in_doc, code = False, None
    return blocks


def mod_exports(text):
    """mod.ts's exports: {name: is_type}."""
    names = {}
    for whole_type, items in re.findall(r"export\s+(type\s+)?\{([^}]*)\}\s*from", text):
        for item in items.split(","):
            item = item.strip()
            if not item:
                continue
            is_type = bool(whole_type) or item.startswith("type ")
            item = re.sub(r"^type\s+", "", item)
            names[item.split(" as ")[-1].strip()] = is_type
    return names


def own_exports(text):
    """A module's own declarations that it exports: {name: is_type}."""
    names = {}
    for kind, name in re.findall(r"^export\s+(?:declare\s+)?(?:async\s+)?(function\*?|const|let|class|abstract\s+class|enum|type|interface)\s+(\w+)", text, re.M):
        names[name] = kind in ("type", "interface")
    return names


def imported_or_declared(code):
    names = set()
    for items in re.findall(r"import\s+(?:type\s+)?\{([^}]*)\}", code):
        names.update(re.sub(r"^type\s+", "", i.strip()).split(" as ")[-1].strip() for i in items.split(",") if i.strip())
    names.update(re.findall(r"\b(?:const|let|var|using|function|class|type|interface)\s+(\w+)", code))
    return names


def module_file(path, start, code, public, own, out_dir):
    """The block as a module of its own, with the imports it needs."""
    code = code.replace('from "multi-tensor-copier"', f'from "{MOD}"').replace('from "./ts/', f'from "{ROOT}/ts/')
    taken = imported_or_declared(code)
    used = set(re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"//.*", "", code)))
    lines = ['/// <reference path="./prelude.d.ts" />', f"// {os.path.relpath(path, ROOT)}:{start}"]
    for source, names in ((MOD, public), (path, own)):
        wanted = sorted(n for n in names if n in used and n not in taken)
        taken.update(wanted)
        if wanted:
            shown = ", ".join(("type " if names[n] else "") + n for n in wanted)
            lines.append(f'import {{ {shown} }} from "{source}";')
    return "\n".join(lines) + "\n" + code


def check(sources):
    """Writes every block of `sources` to a scratch folder and type-checks them: True when all pass."""
    public = mod_exports(open(MOD).read())
    with tempfile.TemporaryDirectory(prefix="mtc-doc-ts.") as out:
        count = 0
        for path in sources:
            text = open(path).read()
            own = {n: t for n, t in own_exports(text).items() if n not in public}
            for start, code in doc_blocks(text):
                count += 1
                name = os.path.relpath(path, ROOT).replace("/", "_").removesuffix(".ts")
                with open(os.path.join(out, f"{name}_{start}.ts"), "w") as f:
                    f.write(module_file(path, start, code, public, own, out))
        if count == 0:
            print("check_doc_ts: no ```ts block in a doc comment", file=sys.stderr)
            return False
        with open(os.path.join(out, "prelude.d.ts"), "w") as f:
            f.write(PRELUDE.format(mod=MOD))
        with open(os.path.join(out, "tsconfig.json"), "w") as f:
            with open(TSCONFIG_TEMPLATE) as template:
                f.write(template.read().replace("@ROOT@", ROOT))
        ok = True
        # Each file is named FILE_LINE.ts: the source file, and the line its block starts on.
        if subprocess.run([TSC, "-p", os.path.join(out, "tsconfig.json")]).returncode != 0:
            print("check_doc_ts: tsc (bun init's tsconfig) failed on the doc examples above (FILE_LINE.ts: the block at ts/FILE:LINE)", file=sys.stderr)
            ok = False
        blocks = sorted(f for f in os.listdir(out) if f.endswith(".ts") and not f.endswith(".d.ts"))
        env = dict(os.environ, DENO_NO_PACKAGE_JSON="1", DENO_NO_UPDATE_CHECK="1")
        if subprocess.run([DENO, "check", "--quiet", *blocks], cwd=out, env=env).returncode != 0:
            print("check_doc_ts: deno check failed on the doc examples above", file=sys.stderr)
            ok = False
        if ok:
            print(f"doc comments: {count} TypeScript examples type-check with tsc (bun init's tsconfig) and deno check")
        return ok


def selftest():
    """A wrong example must fail, under both checkers."""
    with tempfile.NamedTemporaryFile("w", suffix=".ts", dir=os.path.join(ROOT, "ts"), delete=False) as f:
        f.write('/**\n * @example\n * ```ts\n * pinnedTensor("float32", [2]).data.fill(7n);\n * ```\n */\nexport const x = 1;\n')
    try:
        result = subprocess.run([sys.executable, __file__, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    name = os.path.basename(f.name).removesuffix(".ts")
    if result.returncode == 0 or "tsc" not in result.stderr or "deno check" not in result.stderr or name not in result.stdout + result.stderr:
        print("check_doc_ts --selftest: a wrong example passed, or its failure did not say where:\n" + result.stdout + result.stderr, file=sys.stderr)
        return False
    print("check_doc_ts --selftest: a wrong example fails under tsc and deno check, naming its file")
    return True


def main(argv):
    if argv == ["--selftest"]:
        return 0 if selftest() else 1
    sources = argv or sorted(
        os.path.join(d, f) for d, _, files in os.walk(os.path.join(ROOT, "ts")) for f in files if f.endswith(".ts")
    )
    return 0 if check([os.path.abspath(s) for s in sources]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
