#!/usr/bin/env bash
# The public API's documentation as JSR and `deno doc` render it: no lint
# findings (every export documented and explicitly typed, no private type
# in a public signature), no warnings, and the HTML renders with a page for
# each main export. And the README's first example is examples/quick_start.ts
# (tests/ts/example.test.ts runs that; install_test.sh runs the README's copy).
# DENO_NO_PACKAGE_JSON=1: package.json would make deno doc read
# tsconfig.json, whose bun-types (dev tooling for tsc) import the "bun:"
# modules deno cannot resolve, and each such import is a warning. The
# documented sources need neither.
set -euo pipefail
cd "$(dirname "$0")/../.."
DENO=node_modules/.bin/deno
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1 DENO_NO_PACKAGE_JSON=1

fail() { echo "docs test: FAIL: $*" >&2; exit 1; }

# The README's first example is examples/quick_start.ts, importing the package by name.
readme_first=$(awk '/^```ts$/ && !done { grab = 1; next } grab && /^```$/ { grab = 0; done = 1 } grab' README.md)
quick_start=$(grep -v '^//' examples/quick_start.ts | sed 's|from "../ts/mod.ts"|from "multi-tensor-copier"|')
if [ "$readme_first" != "$quick_start" ]; then
  diff <(echo "$readme_first") <(echo "$quick_start") || true
  fail "the README's first example and examples/quick_start.ts differ"
fi
echo "README's first example: the same as examples/quick_start.ts"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/mtc-docs.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

rc=0
"$DENO" doc --lint ts/mod.ts >"$OUT/lint.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || grep -qi "warning" "$OUT/lint.log"; then
  grep -v '^    at ' "$OUT/lint.log" | grep -E -A3 '^(error|warning|Warning)' | head -200
  fail "deno doc --lint ts/mod.ts: $(grep -cE '^error\[' "$OUT/lint.log" || true) lint errors, $(grep -ci warning "$OUT/lint.log" || true) warnings"
fi
echo "deno doc --lint ts/mod.ts: clean"

"$DENO" doc --html --name=multi-tensor-copier --output="$OUT/html" ts/mod.ts >"$OUT/html.log" 2>&1 ||
  { cat "$OUT/html.log"; fail "deno doc --html"; }
if grep -qi "warning" "$OUT/html.log"; then
  grep -v '^    at ' "$OUT/html.log" | head -50
  fail "deno doc --html printed warnings"
fi
for page in index.html all_symbols.html; do
  [ -s "$OUT/html/$page" ] || fail "deno doc --html wrote no $page"
done
for symbol in startCopy AsyncCopyHandle DeviceTensor Tensor MtcError CopyOptions ToDevice prefetch Stream; do
  grep -q "$symbol" "$OUT/html/all_symbols.html" || fail "the rendered docs do not list $symbol"
done
echo "deno doc --html: $(find "$OUT/html" -type f | wc -l) files, every main export listed"
