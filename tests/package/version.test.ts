// The version rules of the bindings (docs/VERSIONING.md), and that every
// place naming the package's version agrees: package.json, deno.json, mtc.h,
// the version the bindings expect (EXPECTED_VERSION_NUMBER), the one their
// objects are marked with (BINDINGS_VERSION) and the
// CHANGELOG's newest release; and that mtc.h, the one header to include,
// includes each of its topic headers (lib/include/mtc/) once, in the order
// its Contents lists them.
import { readdirSync, readFileSync } from "node:fs";
import { BINDINGS_VERSION } from "../../ts/base/copy_identity.ts";
import { checkLibraryVersion } from "../../ts/ffi/library.ts";
import { EXPECTED_VERSION_NUMBER } from "../../ts/ffi/symbols.ts";
import { MtcError } from "../../ts/mod.ts";
import { assert, assertSame, assertThrows, test } from "../ts/harness.ts";

const root = new URL("../../", import.meta.url);
const read = (path: string): string => readFileSync(decodeURIComponent(new URL(path, root).pathname), "utf8");

/** mtc.h with its topic headers (`#include "mtc/….h"`) written in where it includes them. */
function publicHeader(): string {
  return read("lib/include/mtc.h").replace(/^#include "(mtc\/[a-z_]+\.h)"$/gm, (_, topic: string) => read(`lib/include/${topic}`));
}

function headerVersion(): string {
  const header = publicHeader();
  const part = (name: string): string => {
    const m = header.match(new RegExp(`#define MTC_VERSION_${name} (\\d+)`));
    assert(m !== null, `mtc.h defines MTC_VERSION_${name}`);
    return m[1]!;
  };
  return `${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}`;
}

function numberOf(version: string): number {
  const [major, minor, patch] = version.split(".").map(Number);
  return major! * 10000 + minor! * 100 + patch!;
}

test("version: package.json, deno.json, mtc.h and the bindings name the same version", () => {
  const npm = JSON.parse(read("package.json")).version as string;
  const jsr = JSON.parse(read("deno.json")).version as string;
  assert(/^\d+\.\d+\.\d+$/.test(npm), `package.json version ${npm}`);
  assertSame(jsr, npm, "deno.json and package.json versions");
  assertSame(headerVersion(), npm, "mtc.h MTC_VERSION_* and package.json version");
  assertSame(EXPECTED_VERSION_NUMBER, numberOf(npm), "EXPECTED_VERSION_NUMBER (ts/ffi/symbols.ts) and package.json version");
  // The version a copy's marks carry and registers under (one class identity per version).
  assertSame(BINDINGS_VERSION, npm, "BINDINGS_VERSION (ts/base/copy_identity.ts) and package.json version");
});

test("version: the CHANGELOG's newest release is the package's version", () => {
  const npm = JSON.parse(read("package.json")).version as string;
  const newest = read("CHANGELOG.md").match(/^## (\d+\.\d+\.\d+)\b/m);
  assert(newest !== null, "CHANGELOG.md has a release heading (## X.Y.Z...)");
  assertSame(newest[1], npm, "CHANGELOG.md's first release heading and package.json version");
});

test("version: a library of the same 0.x minor is accepted, whatever its patch", () => {
  const minor = Math.floor(EXPECTED_VERSION_NUMBER / 100);
  checkLibraryVersion(EXPECTED_VERSION_NUMBER, "/x/libmtc.so");
  checkLibraryVersion(minor * 100 + 99, "/x/libmtc.so");
  checkLibraryVersion(minor * 100, "/x/libmtc.so");
});

test("version: another major, or another minor below 1.0, is MTC_ERR_UNSUPPORTED naming both versions and the file", () => {
  const e = assertThrows(() => checkLibraryVersion(990000, "/x/libmtc.so", 100), MtcError, "libmtc at /x/libmtc.so is version 99.0.0");
  assertSame(e.code, "MTC_ERR_UNSUPPORTED");
  assert(e.message.includes("these bindings need 0.1.x (written for 0.1.0)"), e.message);
  assert(e.message.includes("rebuild the library or update the bindings"), e.message);
  assertThrows(() => checkLibraryVersion(200, "/x/libmtc.so", 100), MtcError, "is version 0.2.0, but these bindings need 0.1.x");
  assertThrows(() => checkLibraryVersion(0, "/x/libmtc.so", 100), MtcError, "is version 0.0.0");
});

test("version: from 1.0 on, minor releases of the same major are accepted", () => {
  checkLibraryVersion(10203, "/x/libmtc.so", 10000);
  checkLibraryVersion(19999, "/x/libmtc.so", 10100);
  assertThrows(() => checkLibraryVersion(20000, "/x/libmtc.so", 10100), MtcError, "is version 2.0.0, but these bindings need 1.x");
  assertThrows(() => checkLibraryVersion(1.5, "/x/libmtc.so", 10000), MtcError);
});

test("mtc.h: each topic header of lib/include/mtc/ included once, in the order of its Contents, each refusing to be included alone", () => {
  const header = read("lib/include/mtc.h");
  const included = [...header.matchAll(/^#include "mtc\/([a-z_]+\.h)"$/gm)].map((m) => m[1]!);
  const listed = [...header.matchAll(/^ \* {3}mtc\/([a-z_]+\.h) /gm)].map((m) => m[1]!);
  const files = readdirSync(decodeURIComponent(new URL("lib/include/mtc/", root).pathname)).filter((f) => f.endsWith(".h")).sort();
  assertSame(JSON.stringify([...included].sort()), JSON.stringify(files), "every file of lib/include/mtc/ included");
  assertSame(new Set(included).size, included.length, "each once");
  assertSame(JSON.stringify(listed), JSON.stringify(included), "the Contents lists them in the order they are included");
  for (const file of files) assert(read(`lib/include/mtc/${file}`).includes(`#error "include mtc.h, not mtc/${file}"`), `mtc/${file} refuses to be included alone`);
});
