#!/usr/bin/env bash
# Type-checks the README's TypeScript code blocks as a user pastes them into
# a new project: each block a module of its own, checked by tsc under the
# tsconfig.json that `bun init` writes (strict, noUncheckedIndexedAccess,
# module Preserve, ...; bun-types for its "bun" types) and by `deno check`.
# The package's name and ./ts/mod.ts both resolve to this checkout's
# ts/mod.ts. The few names the blocks use without defining them (batch,
# steps, loader(), ...) are declared in a prelude, each block referencing it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TSC=$ROOT/node_modules/.bin/tsc
DENO=$ROOT/node_modules/.bin/deno
OUT=$(mktemp -d "${TMPDIR:-/tmp}/mtc-readme-ts.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

# One file per ```ts block: block1.ts, block2.ts, ...
awk -v out="$OUT" '
  /^```ts$/ { n++; file = sprintf("%s/block%d.ts", out, n); print "/// <reference path=\"./prelude.d.ts\" />" >file; grab = 1; next }
  grab && /^```$/ { grab = 0; close(file); next }
  grab { print >>file }
' README.md
count=$(find "$OUT" -name 'block*.ts' | wc -l)
[ "$count" -gt 0 ] || { echo "check_readme_ts: no \`\`\`ts block in README.md" >&2; exit 1; }
sed -i -e "s|from \"multi-tensor-copier\"|from \"$ROOT/ts/mod.ts\"|" -e "s|from \"./ts/mod.ts\"|from \"$ROOT/ts/mod.ts\"|" "$OUT"/block*.ts

cat >"$OUT/prelude.d.ts" <<PRELUDE
// What the README's blocks use without defining it.
declare const batch: { boxes: import("$ROOT/ts/mod.ts").Tensor; ids: Int32Array; name: string }[];
declare const steps: { ids: Int32Array; pos: Int32Array }[];
declare const ptxText: string;
declare const hostX: Float32Array;
declare const hostY: Float32Array;
declare const myIds: Int32Array;
declare const compute: import("$ROOT/ts/mod.ts").Stream;
declare function loader(): AsyncIterable<{ x: Float32Array; name: string }>;
declare function train(batch: unknown): void;
PRELUDE

# bun init's tsconfig.json (Bun 1.4), with bun-types from this checkout for its "types": ["bun"]
# (scripts/bun_init_tsconfig.json, shared with scripts/check_doc_ts.py).
sed "s|@ROOT@|$ROOT|g" "$ROOT/scripts/bun_init_tsconfig.json" >"$OUT/tsconfig.json"

"$TSC" -p "$OUT/tsconfig.json" || { echo "check_readme_ts: tsc (bun init's tsconfig) failed on the README's TypeScript blocks above (blockN.ts is the Nth TypeScript block)" >&2; exit 1; }
(cd "$OUT" && DENO_NO_PACKAGE_JSON=1 "$DENO" check --quiet block*.ts) ||
  { echo "check_readme_ts: deno check failed on the README's TypeScript blocks above" >&2; exit 1; }
echo "README: $count TypeScript blocks type-check with tsc (bun init's tsconfig) and deno check"
