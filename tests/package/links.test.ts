// The link check of the shipped files (tests/package/check_links.ts) on small
// file sets of its own: what it finds, and what it must leave alone.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix } from "node:path";
import { anchorsOf, checkLinks, slug } from "./check_links.ts";
import { assert, assertEquals, assertSame, test } from "../ts/harness.ts";

/** Writes `files` into a new folder and checks them all; gives "file:line: message" lines. */
function check(files: Record<string, string>, shipped = Object.keys(files)): string[] {
  const root = mkdtempSync(posix.join(tmpdir(), "mtc-links-"));
  try {
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(posix.join(root, posix.dirname(name)), { recursive: true });
      writeFileSync(posix.join(root, name), text);
    }
    return checkLinks(root, shipped).problems.map((p) => `${p.file}:${p.line}: ${p.message}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test("links: slugs as GitHub makes them", () => {
  assertSame(slug("Issue 23's rules (aliasing, private state): A/B on the H100, 2026-11-25"), "issue-23s-rules-aliasing-private-state-ab-on-the-h100-2026-11-25");
  assertSame(slug("copyInto: into buffers that already exist"), "copyinto-into-buffers-that-already-exist");
  assertSame(slug("`mtc.h` and [the ABI](x.md)"), "mtch-and-the-abi");
  assertEquals([...anchorsOf("# A\n## A\n```\n# not a heading\n```\n### B c\n")], ["a", "a-1", "b-c"]);
});

test("links: files and anchors that resolve pass; external links and code are left alone", () => {
  const problems = check({
    "README.md": [
      "# Title",
      "[docs](docs/GUIDE.md), [a part](docs/GUIDE.md#the-second-part), [here](#title), [folder](docs/)",
      "[web](https://example.com/x.md) <https://example.com> [mail](mailto:a@b.c)",
      "`[not](a-link.md)` and `arr[0](x)`",
      "```ts",
      'import { x } from "multi-tensor-copier";',
      "[inside a fence](missing.md)",
      "```",
      "[ref]: docs/GUIDE.md",
    ].join("\n"),
    "docs/GUIDE.md": "# Guide\n## The second part\n[back](../README.md#title)\n",
  });
  assertEquals(problems, []);
});

test("links: a file not shipped, a missing anchor, a path outside the package and an absolute path are found", () => {
  const problems = check(
    {
      "README.md": [
        "[tests](tests/fake/README.md)",
        "[anchor](docs/GUIDE.md#nowhere)",
        "[up](../other/README.md)",
        "[root](/docs/GUIDE.md)",
        '<a href="docs/MISSING.md">html</a>',
      ].join("\n"),
      "docs/GUIDE.md": "# Guide\n",
      "tests/fake/README.md": "# not shipped\n",
    },
    ["README.md", "docs/GUIDE.md"],
  );
  assertEquals(problems, [
    "README.md:1: link tests/fake/README.md: tests/fake/README.md is not shipped",
    "README.md:2: link docs/GUIDE.md#nowhere: docs/GUIDE.md has no heading #nowhere",
    "README.md:3: link ../other/README.md: outside the package",
    "README.md:4: link /docs/GUIDE.md: an absolute path, which no reader of the package has",
    "README.md:5: link docs/MISSING.md: docs/MISSING.md is not shipped",
  ]);
});

test("links: doc comments of code are checked; a code block importing a checkout path is found", () => {
  const problems = check({
    "README.md": "# R\n```ts\nimport { startCopy } from \"./ts/mod.ts\";\n```\n",
    "ts/mod.ts": [
      "/**",
      " * See [the guide](../docs/GUIDE.md) and [gone](../docs/GONE.md).",
      " *",
      " * ```ts",
      ' * import { Tensor } from "../ts/mod.ts";',
      " * ```",
      " * @module",
      " */",
      'const notDoc = "[x](nowhere.md)";',
    ].join("\n"),
    "docs/GUIDE.md": "# Guide\n",
  });
  assertEquals(problems, [
    'README.md:3: a code block imports "./ts/mod.ts": import "multi-tensor-copier" (the package\'s name) instead',
    "ts/mod.ts:2: link ../docs/GONE.md: docs/GONE.md is not shipped",
    'ts/mod.ts:5: a code block imports "../ts/mod.ts": import "multi-tensor-copier" (the package\'s name) instead',
  ]);
  assert(problems.every((p) => !p.includes("nowhere.md")), "a string outside a doc comment is not a link");
});
