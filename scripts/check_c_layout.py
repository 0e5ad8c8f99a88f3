#!/usr/bin/env python3
"""check_c_layout.py — keeps lib/src laid out as the pipeline of a copy.

Checks, over lib/src and the folder list in build.zig (`lib_folders`):
  - each folder includes headers only from itself and the folders listed
    after it in build.zig (plan -> run -> layout -> stage -> memory -> cuda
    -> base), and every included header exists;
  - no include circle between units (a unit is foo.c with foo.h): not two
    units including each other, nor a longer loop;
  - the same for calls, which a declaration in mtc.h (or any header) makes
    possible without an include: no function calls one defined in a folder
    before its own, and no call circle between units. A call is a function
    of lib/src named and followed by "(" in a .c file or in the body of a
    header's static inline function; a function handed on by name (a
    callback) is no call, which is how a lower folder may reach back up;
  - no .c or .h above MAX_LINES lines, in lib/src and in the emulated
    driver (tests/fake_cuda, its selftest aside);
  - each file opens with a comment naming itself and its job ("/* foo.c — ");
  - build.zig lists exactly the .c files that exist.

Usage: check_c_layout.py [ROOT]   (ROOT: the checkout, default: this repo)
       check_c_layout.py --selftest   (proves each check fails when it should)
Exits 1 and names every problem found.
"""
import os
import re
import sys
import tempfile

MAX_LINES = 400
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FOLDER_ENTRY = re.compile(
    r'\.path\s*=\s*"lib/src/([a-z_]+)"\s*,\s*\.files\s*=\s*&\.\{([^}]*)\}')


def folder_order(root):
    """[(folder, [files listed])] in build.zig's order."""
    with open(os.path.join(root, "build.zig")) as f:
        text = f.read()
    return [(m.group(1), re.findall(r'"([^"]+)"', m.group(2)))
            for m in FOLDER_ENTRY.finditer(text)]


def find_cycle(edges):
    """One include circle as a list of units, or None."""
    state = {}  # unit -> 1 visiting, 2 done
    stack = []

    def visit(unit):
        state[unit] = 1
        stack.append(unit)
        for nxt in sorted(edges.get(unit, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[unit] = 2
        return None

    for unit in sorted(edges):
        if unit not in state:
            found = visit(unit)
            if found:
                return found
    return None


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
# A function defined at the start of a line, not static (static inline in
# headers are read apart): its return type, name, parameters, then "{".
DEFINITION = re.compile(
    r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", re.M)
INLINE = re.compile(r"^static\s+inline\b[^;{]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", re.M)
# A declaration at the start of a line ("int f(int x);"): no call.
PROTOTYPE = re.compile(r"^[A-Za-z_][\w \t*]*?\b[A-Za-z_]\w*\s*\([^;{}]*\)\s*;", re.M)


def code_of(text):
    """The text without comments and with empty string literals."""
    return STRING.sub('""', COMMENT.sub(" ", text))


def body_at(code, brace):
    """The text from the "{" at `brace` to its matching "}"."""
    depth = 0
    for i in range(brace, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return code[brace:i + 1]
    return code[brace:]


def call_problems(units, rank):
    """Upward calls and call circles. units: {unit: [(file, code)]}."""
    problems = []
    defined = {}  # function -> unit
    calling = {}  # unit -> the code its calls are read from
    for unit, files in units.items():
        parts = []
        for name, code in files:
            if name.endswith(".c"):
                for m in DEFINITION.finditer(code):
                    defined.setdefault(m.group(1), unit)
                parts.append(PROTOTYPE.sub(" ", code))
            else:
                for m in INLINE.finditer(code):
                    defined.setdefault(m.group(1), unit)
                    parts.append(body_at(code, m.end() - 1))
        calling[unit] = "\n".join(parts)
    if not defined:
        return problems, {}
    call = re.compile(r"\b(" + "|".join(sorted(map(re.escape, defined))) + r")\s*\(")
    edges = {}
    for unit, code in sorted(calling.items()):
        folder = unit.split("/", 1)[0]
        for name in sorted(set(call.findall(code))):
            to_unit = defined[name]
            if to_unit == unit:
                continue
            to_folder = to_unit.split("/", 1)[0]
            if rank.get(to_folder, -1) < rank.get(folder, -1):
                problems.append(f"lib/src/{unit}: calls {name} ({to_unit}) in {to_folder}/, "
                                f"which comes before {folder}/ in the pipeline")
            edges.setdefault(unit, set()).add(to_unit)
    return problems, edges


def check(root):
    """Every problem found, as messages; [] when the layout is clean."""
    problems = []
    src = os.path.join(root, "lib", "src")
    order = folder_order(root)
    if not order:
        return ["build.zig has no lib_folders entries (.path = \"lib/src/...\")"]
    rank = {folder: i for i, (folder, _) in enumerate(order)}

    files = []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            problems.append(f"lib/src/{folder}: files belong in a folder of lib/src")
            continue
        if folder not in rank:
            problems.append(f"lib/src/{folder}/: not in build.zig's lib_folders")
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith((".c", ".h")):
                files.append((folder, name))

    for folder, listed in order:
        present = {n for f, n in files if f == folder and n.endswith(".c")}
        for name in sorted(present - set(listed)):
            problems.append(f"lib/src/{folder}/{name}: not listed in build.zig")
        for name in sorted(set(listed) - present):
            problems.append(f"build.zig lists lib/src/{folder}/{name}, which does not exist")

    edges = {}
    units = {}
    for folder, name in files:
        rel = f"{folder}/{name}"
        with open(os.path.join(src, folder, name)) as f:
            text = f.read()
        units.setdefault(rel.rsplit(".", 1)[0], []).append((name, code_of(text)))
        lines = text.count("\n")
        if lines > MAX_LINES:
            problems.append(f"lib/src/{rel}: {lines} lines, more than {MAX_LINES}")
        if not text.startswith(f"/* {name} — "):
            problems.append(f"lib/src/{rel}: does not open with a comment "
                            f"\"/* {name} — <its job>\"")
        unit = rel.rsplit(".", 1)[0]
        for header in INCLUDE.findall(text):
            if header == "mtc.h":
                continue
            if "/" not in header:
                problems.append(f"lib/src/{rel}: includes \"{header}\"; name "
                                "the folder (\"base/error.h\")")
                continue
            to_folder = header.split("/", 1)[0]
            if not os.path.isfile(os.path.join(src, header)):
                problems.append(f"lib/src/{rel}: includes \"{header}\", which does not exist")
                continue
            if to_folder not in rank or rank[to_folder] < rank[folder]:
                problems.append(f"lib/src/{rel}: includes \"{header}\" from {to_folder}/, "
                                f"which comes before {folder}/ in the pipeline")
            target = header.rsplit(".", 1)[0]
            if target != unit:
                edges.setdefault(unit, set()).add(target)

    cycle = find_cycle(edges)
    if cycle:
        problems.append("include circle: " + " -> ".join(cycle))
    upward, calls = call_problems(units, rank)
    problems += upward
    cycle = find_cycle(calls)
    if cycle:
        problems.append("call circle: " + " -> ".join(cycle))

    fake = os.path.join(root, "tests", "fake_cuda")
    if os.path.isdir(fake):
        for name in sorted(os.listdir(fake)):
            if not name.endswith((".c", ".h")) or "selftest" in name:
                continue
            with open(os.path.join(fake, name)) as f:
                lines = f.read().count("\n")
            if lines > MAX_LINES:
                problems.append(f"tests/fake_cuda/{name}: {lines} lines, more than {MAX_LINES}")
    return problems


def selftest():
    """Each check must fail on a tree made to break it."""
    good = {
        "build.zig": '.{ .path = "lib/src/top", .files = &.{ "a.c" } },\n'
                     '.{ .path = "lib/src/low", .files = &.{ "b.c" } },\n',
        "lib/src/top/a.c": '/* a.c — a. */\n#include "top/a.h"\n#include "low/b.h"\n',
        "lib/src/top/a.h": '/* a.h — a. */\n',
        "lib/src/low/b.c": '/* b.c — b. */\n#include "low/b.h"\n',
        "lib/src/low/b.h": '/* b.h — b. */\n#include "mtc.h"\n',
    }
    breaks = {
        "include circle": {
            "lib/src/top/c.c": '/* c.c — c. */\n#include "top/a.h"\n',
            "lib/src/top/a.h": '/* a.h — a. */\n#include "top/c.h"\n',
            "lib/src/top/c.h": '/* c.h — c. */\n',
            "build.zig": good["build.zig"].replace('"a.c" }', '"a.c", "c.c" }'),
        },
        "comes before": {
            "lib/src/low/b.c": '/* b.c — b. */\n#include "top/a.h"\n',
        },
        "more than": {
            "lib/src/low/b.c": '/* b.c — b. */\n' + "int x;\n" * (MAX_LINES + 1),
        },
        "does not open with a comment": {
            "lib/src/low/b.h": '#include "mtc.h"\n',
        },
        "not listed in build.zig": {
            "lib/src/low/extra.c": '/* extra.c — e. */\n',
        },
        "does not exist": {
            "lib/src/top/a.c": '/* a.c — a. */\n#include "low/gone.h"\n',
        },
        "name the folder": {
            "lib/src/top/a.c": '/* a.c — a. */\n#include "a.h"\n',
        },
        # b.c reaches a.c's function through a declaration of its own (as
        # through mtc.h): no include, still an upward call.
        "calls top_work": {
            "lib/src/top/a.c": '/* a.c — a. */\n#include "top/a.h"\n#include "low/b.h"\n'
                               'int top_work(int x) {\n  return x;\n}\n',
            "lib/src/low/b.c": '/* b.c — b. */\n#include "low/b.h"\nint top_work(int x);\n'
                               'int low_work(void) {\n  return top_work(1);\n}\n',
        },
        "call circle": {
            "lib/src/top/c.c": '/* c.c — c. */\nint c_work(void);\nint a_work(void);\n'
                               'int c_work(void) {\n  return a_work();\n}\n',
            "lib/src/top/a.c": '/* a.c — a. */\n#include "top/a.h"\nint c_work(void);\n'
                               'int a_work(void) {\n  return c_work();\n}\n',
            "build.zig": good["build.zig"].replace('"a.c" }', '"a.c", "c.c" }'),
        },
        "tests/fake_cuda/fake_big.c": {
            "tests/fake_cuda/fake_big.c": "int x;\n" * (MAX_LINES + 1),
        },
    }
    failures = 0

    def build(tree):
        root = tempfile.mkdtemp(prefix="c_layout_")
        for rel, text in tree.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return root

    clean = check(build(good))
    if clean:
        print(f"selftest: a clean tree was reported: {clean}")
        failures += 1
    # A callback handed down by name is no call: low/ may hold top/'s function.
    callback = {**good,
                "lib/src/top/a.c": '/* a.c — a. */\n#include "top/a.h"\n#include "low/b.h"\n'
                                   'static void drop(int *p) { (void)p; }\n'
                                   'void top_run(void) {\n  low_hold(drop);\n}\n'
                                   'int top_work(int x) {\n  return x;\n}\n',
                "lib/src/low/b.c": '/* b.c — b. */\n#include "low/b.h"\nint top_work(int x);\n'
                                   'void low_hold(void (*release)(int *)) {\n  release(0);\n'
                                   '  /* top_work(2) in a comment, "top_work(3)" in a string */\n}\n'}
    found = check(build(callback))
    if found:
        print(f"selftest: a callback or a name in a comment was taken for a call: {found}")
        failures += 1
    for expected, change in breaks.items():
        found = check(build({**good, **change}))
        if not any(expected in p for p in found):
            print(f"selftest: a tree with '{expected}' was not caught: {found}")
            failures += 1
    print(f"check_c_layout selftest: {len(breaks) + 2 - failures} passed, {failures} failed")
    return failures == 0


def main():
    args = sys.argv[1:]
    if args == ["--selftest"]:
        return 0 if selftest() else 1
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    folders = " -> ".join(f for f, _ in folder_order(root))
    if problems:
        print(f"lib/src layout: {len(problems)} problem(s)")
        return 1
    print(f"lib/src layout: {folders}; no include or call circle, no upward call; "
          f"no file above {MAX_LINES} lines (lib/src, tests/fake_cuda)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
