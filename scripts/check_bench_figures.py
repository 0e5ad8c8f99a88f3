#!/usr/bin/env python3
"""The README's benchmark figures are docs/BENCHMARKS.md's.

Each row of the table in the README's "## Benchmarks" names its scenario at
the end of its first cell, e.g. "(S1)"; its Bun, Deno, naive and floor cells
must be, character for character, those of that scenario's row in the table
of BENCHMARKS.md's "## The latest GPU figures". Every other figure of the
README (a number with µs, ms, GB/s, batches/s or ×) must appear in that
section of BENCHMARKS.md. Exits 1 naming each figure that differs.

  python3 scripts/check_bench_figures.py [README.md docs/BENCHMARKS.md]
  python3 scripts/check_bench_figures.py --selftest
"""
import re
import sys

FIGURE = re.compile(r"\d[\d,.]*(?:–\d[\d,.]*)?(?: (?:µs|ms|GB/s|batches/s)\b|×)")
COLUMNS = {"Bun": "bun", "Deno": "deno", "naive": "naive", "floor": "floor"}


def section(text, heading):
    """The lines of the "## heading..." section, to the next "## "."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("## " + heading)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start + 1:end]


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table(lines):
    """(column names by kind, rows as lists of cells) of the first table in lines."""
    rows = [cells(line) for line in lines if line.startswith("|")]
    if len(rows) < 2:
        return {}, []
    kinds = {}
    for i, name in enumerate(rows[0]):
        for word, kind in COLUMNS.items():
            if word in name and kind not in kinds:
                kinds[kind] = i
    return kinds, rows[2:]


def check(readme, benchmarks):
    """The problems, one line each; none when the README's figures are BENCHMARKS.md's."""
    ours = section(readme, "Benchmarks")
    theirs = section(benchmarks, "The latest GPU figures")
    if ours is None or theirs is None:
        return ["README.md has no \"## Benchmarks\" or BENCHMARKS.md no \"## The latest GPU figures\""]
    problems = []
    our_kinds, our_rows = table(ours)
    their_kinds, their_rows = table(theirs)
    if not our_rows:
        problems.append("the README's Benchmarks section has no table")
    for kind in COLUMNS.values():
        if kind not in our_kinds or kind not in their_kinds:
            problems.append(f"a table lacks the {kind} column (README: {sorted(our_kinds)}, BENCHMARKS.md: {sorted(their_kinds)})")
    if problems:
        return problems
    scenarios = {}
    for row in their_rows:  # the first row of a scenario; later ones are its variants (S5w at N = 4)
        scenarios.setdefault(row[0].split(" ")[0], row)
    for row in our_rows:
        m = re.search(r"\(([A-Z][0-9A-Za-z]*)\)$", row[0])
        if m is None:
            problems.append(f"README row \"{row[0]}\" names no scenario at its end, e.g. (S1)")
            continue
        scenario = scenarios.get(m.group(1))
        if scenario is None:
            problems.append(f"README row \"{row[0]}\": BENCHMARKS.md's table has no {m.group(1)}")
            continue
        for kind in COLUMNS.values():
            ours_cell, theirs_cell = row[our_kinds[kind]], scenario[their_kinds[kind]]
            if ours_cell != theirs_cell:
                problems.append(f"{m.group(1)}, {kind}: README \"{ours_cell}\", BENCHMARKS.md \"{theirs_cell}\"")
    their_text = "\n".join(theirs)
    for line in ours:
        if line.startswith("|"):
            continue
        for figure in FIGURE.findall(line):
            if figure not in their_text:
                problems.append(f"README figure \"{figure}\" is not in BENCHMARKS.md's latest GPU figures")
    return problems


def selftest():
    benchmarks = """## The latest GPU figures

| scenario | Bun | Deno | naive, per leaf | floor | when |
|---|---|---|---|---|---|
| S1 the batch | 164–320 µs | 205–317 µs | 5.0–6.4 ms | 10–12 µs | today |

accvlab took 0.9–1.8 ms.

## Next
"""
    good = """## Benchmarks

| batch (scenario) | Bun | Deno | naive | floor |
|---|---|---|---|---|
| the batch (S1) | 164–320 µs | 205–317 µs | 5.0–6.4 ms | 10–12 µs |

For scale, accvlab took 0.9–1.8 ms on 8 × 16 MiB.
"""
    assert check(good, benchmarks) == [], check(good, benchmarks)
    drifted = good.replace("164–320 µs", "164–234 µs")
    assert check(drifted, benchmarks) == ['S1, bun: README "164–234 µs", BENCHMARKS.md "164–320 µs"'], check(drifted, benchmarks)
    assert "not in BENCHMARKS.md" in check(good.replace("0.9–1.8 ms", "195 batches/s"), benchmarks)[0]
    assert "names no scenario" in check(good.replace("(S1)", ""), benchmarks)[0]
    assert "has no S2" in check(good.replace("(S1)", "(S2)"), benchmarks)[0]
    print("check_bench_figures selftest: ok")


def main(argv):
    if argv[1:] == ["--selftest"]:
        selftest()
        return 0
    readme_path, benchmarks_path = argv[1:3] if len(argv) == 3 else ("README.md", "docs/BENCHMARKS.md")
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    with open(benchmarks_path, encoding="utf-8") as f:
        benchmarks = f.read()
    problems = check(readme, benchmarks)
    if problems:
        print(f"{readme_path}'s figures differ from {benchmarks_path}'s:")
        for problem in problems:
            print("  " + problem)
        return 1
    rows = len(table(section(readme, "Benchmarks"))[1])
    print(f"{readme_path}: the {rows} rows of the benchmark table and every figure around it are {benchmarks_path}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
