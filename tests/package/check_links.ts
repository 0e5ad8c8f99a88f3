/**
 * The links of a shipped file set: every relative link in a Markdown file, and
 * in a doc comment of a .ts, .d.ts or .js file, must name a file of the set
 * (or a folder holding some), and an anchor must name a heading of the file it
 * points into. Code blocks in them must import the library by its package
 * name, not by a checkout's path (`./ts/mod.ts`), since a reader of the
 * installed package has no such file.
 *
 *   deno run --allow-read tests/package/check_links.ts ROOT            every file under ROOT
 *   deno run --allow-read tests/package/check_links.ts ROOT FILE...    only FILEs (relative to ROOT)
 *
 * (or `bun tests/package/check_links.ts ...`). Prints each broken link as
 * `file:line: ...` and exits 1 if there is one.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { posix } from "node:path";

/** One problem found: where, and what. */
export interface LinkProblem {
  file: string;
  line: number;
  message: string;
}

/** A text to check, as it is read: Markdown, or the doc comments of code. */
interface Source {
  file: string;
  /** Markdown lines, each with its line number in `file`. */
  lines: { text: string; line: number }[];
}

const CODE_FILE = /\.(ts|mts|js|mjs)$/;

/** The Markdown of a file: a .md file whole, or the doc comments of a code file. */
export function markdownOf(file: string, text: string): Source {
  const all = text.split("\n");
  if (!CODE_FILE.test(file)) return { file, lines: all.map((t, i) => ({ text: t, line: i + 1 })) };
  const lines: Source["lines"] = [];
  let inDoc = false;
  all.forEach((raw, i) => {
    let t = raw;
    if (!inDoc) {
      const start = t.indexOf("/**");
      if (start < 0) return;
      inDoc = true;
      t = t.slice(start + 3);
    }
    const end = t.indexOf("*/");
    if (end >= 0) {
      t = t.slice(0, end);
      inDoc = false;
    }
    lines.push({ text: t.replace(/^\s*\* ?/, ""), line: i + 1 });
  });
  return { file, lines };
}

/**
 * A heading's anchor as GitHub, npm and JSR make it: lower case, inline
 * markup dropped, punctuation removed, spaces to hyphens.
 */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[`*]/g, "")
    .toLowerCase()
    .trim()
    .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a Markdown text: one per heading, repeats numbered as GitHub does. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split("\n")) {
    const f = line.match(/^\s*(```|~~~)/);
    if (f) {
      if (fence === undefined) fence = f[1];
      else if (f[1] === fence) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const h = line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const a of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(a[1]!);
  return anchors;
}

/** Inline code spans blanked out, so that brackets inside them are not links. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)(.+?)\1/g, (m) => "`" + "x".repeat(m.length - 2) + "`");
}

const INLINE_LINK = /!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+"[^"]*")?\s*\)/g;
const REFERENCE = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$/;
const HTML_LINK = /<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"/g;
/** A relative import of the library's entry (`./ts/mod.ts`, `../ts/mod.ts`, `./mod.ts`). */
const RELATIVE_ENTRY = /(?:from\s+|import\s*\(\s*|import\s+)["'](\.{1,2}\/[^"']*mod\.ts)["']/g;

/** The links of a source (outside code blocks) and the relative imports of the entry inside them. */
export function linksOf(source: Source): { links: { target: string; line: number }[]; imports: { spec: string; line: number }[] } {
  const links: { target: string; line: number }[] = [];
  const imports: { spec: string; line: number }[] = [];
  let fence: string | undefined;
  for (const { text, line } of source.lines) {
    const f = text.match(/^\s*(```|~~~)/);
    if (f) {
      if (fence === undefined) fence = f[1];
      else if (f[1] === fence) fence = undefined;
      continue;
    }
    if (fence !== undefined) {
      for (const m of text.matchAll(RELATIVE_ENTRY)) imports.push({ spec: m[1]!, line });
      continue;
    }
    const plain = withoutCodeSpans(text);
    for (const m of plain.matchAll(INLINE_LINK)) links.push({ target: m[1]!, line });
    for (const m of plain.matchAll(HTML_LINK)) links.push({ target: m[1]!, line });
    const r = plain.match(REFERENCE);
    if (r) links.push({ target: r[1]!, line });
  }
  return { links, imports };
}

/**
 * Checks `files` (paths relative to `root`, "/"-separated), the set that is
 * shipped: each link must resolve inside it. Gives the problems, and how
 * many links and code-block imports were looked at.
 */
export function checkLinks(root: string, files: string[]): { problems: LinkProblem[]; links: number } {
  const shipped = new Set(files);
  const folders = new Set<string>();
  for (const f of files) {
    for (let d = posix.dirname(f); d !== "." && d !== "/"; d = posix.dirname(d)) folders.add(d);
  }
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string): Set<string> => {
    let a = anchorCache.get(file);
    if (a === undefined) anchorCache.set(file, a = anchorsOf(readFileSync(posix.join(root, file), "utf8")));
    return a;
  };
  const problems: LinkProblem[] = [];
  let count = 0;
  for (const file of files) {
    if (!file.endsWith(".md") && !CODE_FILE.test(file)) continue;
    const source = markdownOf(file, readFileSync(posix.join(root, file), "utf8"));
    const { links, imports } = linksOf(source);
    count += links.length;
    const found: LinkProblem[] = [];
    for (const { spec, line } of imports) {
      found.push({ file, line, message: `a code block imports "${spec}": import "multi-tensor-copier" (the package's name) instead` });
    }
    for (const { target, line } of links) {
      const problem = checkTarget(file, target, shipped, folders, anchors);
      if (problem !== undefined) found.push({ file, line, message: `link ${target}: ${problem}` });
    }
    problems.push(...found.sort((a, b) => a.line - b.line));
  }
  return { problems, links: count };
}

function checkTarget(
  file: string,
  target: string,
  shipped: Set<string>,
  folders: Set<string>,
  anchors: (file: string) => Set<string>,
): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return undefined; // https:, mailto:, ...
  if (target === "") return "empty";
  const hash = target.indexOf("#");
  const pathPart = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  if (pathPart.startsWith("/")) return "an absolute path, which no reader of the package has";
  let path: string;
  try {
    path = pathPart === "" ? file : posix.normalize(posix.join(posix.dirname(file), decodeURIComponent(pathPart)));
  } catch {
    return "not a valid path";
  }
  path = path.replace(/\/$/, "");
  if (path.startsWith("../") || path === "..") return "outside the package";
  if (!shipped.has(path)) {
    if (folders.has(path) || path === ".") return anchor === undefined ? undefined : "an anchor on a folder";
    return `${path} is not shipped`;
  }
  if (anchor === undefined || anchor === "") return undefined;
  if (!path.endsWith(".md")) return /^L\d+(-L\d+)?$/.test(anchor) ? undefined : `an anchor into ${path}, which has no headings`;
  return anchors(path).has(anchor) ? undefined : `${path} has no heading #${anchor}`;
}

/** Every file under `root`, relative to it. */
export function filesUnder(root: string, dir = ""): string[] {
  const out: string[] = [];
  for (const name of readdirSync(posix.join(root, dir)).sort()) {
    const rel = dir === "" ? name : `${dir}/${name}`;
    if (statSync(posix.join(root, rel)).isDirectory()) out.push(...filesUnder(root, rel));
    else out.push(rel);
  }
  return out;
}

if (import.meta.main) {
  const g = globalThis as unknown as {
    Deno?: { args: string[]; exit(code: number): never };
    process?: { argv: string[]; exit(code: number): never };
  };
  const args = g.Deno ? g.Deno.args : g.process!.argv.slice(2);
  const exit = (code: number): never => (g.Deno ? g.Deno.exit(code) : g.process!.exit(code));
  const [root, ...named] = args;
  if (root === undefined || !existsSync(root)) {
    console.error("usage: check_links.ts ROOT [FILE...]   (FILEs relative to ROOT; default: every file under it)");
    exit(2);
  }
  const files = named.length > 0 ? named : filesUnder(root!);
  const missing = files.filter((f) => !existsSync(posix.join(root!, f)));
  if (missing.length > 0) {
    console.error(`check_links: no such file under ${root}: ${missing.join(", ")}`);
    exit(2);
  }
  const { problems, links } = checkLinks(root!, files);
  for (const p of problems) console.log(`${p.file}:${p.line}: ${p.message}`);
  const docs = files.filter((f) => f.endsWith(".md") || CODE_FILE.test(f)).length;
  if (problems.length > 0) {
    console.log(`check_links: ${problems.length} broken link(s) or checkout imports in ${docs} documents of ${files.length} files`);
    exit(1);
  }
  console.log(`check_links: all ${links} links resolve, no code block imports a checkout path (${docs} documents of ${files.length} files)`);
}
