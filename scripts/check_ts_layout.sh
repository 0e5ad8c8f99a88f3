#!/usr/bin/env bash
# The TypeScript library's layout (ts/): no import cycle, type-only imports
# included, found by dpdm; each folder imports only from itself and the
# folders below it (thread → copy → tensor → gpu → ffi → base); no file above 400
# lines. dpdm comes from node_modules when it is installed there, else npx
# fetches the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
DPDM_VERSION=4.3.0
if [ -x node_modules/.bin/dpdm ]; then dpdm=(node_modules/.bin/dpdm); else dpdm=(npx --yes "dpdm@$DPDM_VERSION"); fi
out=$(mktemp "${TMPDIR:-/tmp}/mtc-deps.XXXXXX.json")
trap 'rm -f "$out"' EXIT
# Entries that nothing imports: the public one, the test helpers, the npm
# package's entry (tsup.config.ts), the script a loader's workers run and
# the package's command (ts/cli.ts, the doctor).
entries=(ts/mod.ts ts/testing.ts ts/npm.ts ts/worker.ts ts/cli.ts)
"${dpdm[@]}" --no-warning --no-tree --no-progress --exit-code circular:1 -o "$out" "${entries[@]}"
node - "$out" <<'JS'
const fs = require("node:fs");
const { tree } = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
// Lower folders first; a file may import from its own folder and any folder before it.
const order = ["base", "ffi", "gpu", "tensor", "copy", "thread", "."];
const folderOf = (file) => {
  const parts = file.split("/");
  return parts.length === 2 ? "." : parts[1];
};
const problems = [];
let files = 0;
for (const [file, deps] of Object.entries(tree)) {
  if (!file.startsWith("ts/")) continue;
  files++;
  const from = order.indexOf(folderOf(file));
  if (from < 0) problems.push(`${file}: a folder the layout does not know (add it to scripts/check_ts_layout.sh)`);
  for (const dep of deps ?? []) {
    if (dep.id === null || !dep.id.startsWith("ts/")) continue;
    const to = order.indexOf(folderOf(dep.id));
    if (to > from) problems.push(`${file} imports ${dep.id}: ts/${folderOf(file)}/ is below ts/${folderOf(dep.id)}/`);
  }
  const lines = fs.readFileSync(file, "utf8").split("\n").length - 1;
  if (lines > 400) problems.push(`${file}: ${lines} lines (at most 400)`);
}
if (problems.length > 0) {
  console.log(problems.join("\n"));
  process.exit(1);
}
console.log(`ts/: ${files} files, no import cycle, each folder imports only from itself and the folders below it, none above 400 lines`);
JS
