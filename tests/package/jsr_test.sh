#!/usr/bin/env bash
# The JSR package: `deno publish --dry-run` type-checks ts/mod.ts, checks the
# public API for slow types (exports without explicit types) and lists the
# files it would publish; then checks that list against deno.json's intent:
# the ts/ sources, README.md, CHANGELOG.md, deno.json, docs/ (with its trace pictures), the C header and the C and
# Python examples, nothing else; and that every link in them resolves inside
# that set (tests/package/check_links.ts). Runs offline: the
# dry run needs no network (jsr.io is only contacted by a real publish).
# --allow-dirty: a dry run in a working tree with uncommitted changes; it
# skips no check of the package.
set -euo pipefail
cd "$(dirname "$0")/../.."
DENO=node_modules/.bin/deno
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1

fail() { echo "jsr test: FAIL: $*" >&2; exit 1; }

out=$("$DENO" publish --dry-run --allow-dirty 2>&1) || { echo "$out"; fail "deno publish --dry-run"; }
echo "$out"
grep -q "Checking for slow types in the public API" <<<"$out" || fail "the dry run did not check for slow types"
grep -q "Success Dry run complete" <<<"$out" || fail "the dry run did not complete"

files=$(sed -n 's|^ *file://'"$PWD"'/\([^ ]*\) (.*|\1|p' <<<"$out" | sort)
[ -n "$files" ] || fail "no file list in the dry run's output"
for f in deno.json README.md LICENSE ts/mod.ts ts/ffi/library.ts ts/ffi/symbols.ts; do
  grep -qxF "$f" <<<"$files" || fail "the package lacks $f"
done
for f in CHANGELOG.md docs/*.md lib/include/mtc.h examples/c/copy_batch.c examples/python/copy_batch.py; do
  grep -qxF "$f" <<<"$files" || fail "the package lacks $f (the README links to the docs; embedders read the rest)"
done
others=$(grep -vE '^(deno\.json|README\.md|LICENSE|CHANGELOG\.md|ts/.+\.ts|docs/[A-Z-]+\.md|docs/traces/[a-z0-9-]+\.svg|lib/include/.+\.h|examples/c/[a-z_]+\.c|examples/python/[a-z_]+\.py)$' <<<"$files" || true)
[ -z "$others" ] || fail "the package would publish files it should not: $others"
! grep -qxF ts/testing.ts <<<"$files" || fail "ts/testing.ts (test helpers) would be published"
# shellcheck disable=SC2086 # one argument a file
"$DENO" run --allow-read tests/package/check_links.ts . $files || fail "a published file links to what the package lacks (tests/package/check_links.ts)"
echo "jsr test: $(wc -l <<<"$files") files (deno.json, README.md, LICENSE, CHANGELOG.md, ts/, docs/, mtc.h, the C and Python examples); no slow types"
