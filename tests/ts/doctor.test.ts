// `multi-tensor-copier doctor` (ts/cli.ts) as a child process: with no
// driver it exits 1 and its last line says why; with two emulated devices it
// exits 0 and lists them, their memory and their peer access (none with
// FAKE_CUDA_NO_PEER); an unknown command is a usage error. The package test
// (tests/package/install_test.sh) runs the same from the installed tarball,
// and under Deno without permissions.
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertSame, test } from "./harness.ts";
import { runScript } from "./fixtures/spawn.ts";

const cli = new URL("../../ts/cli.ts", import.meta.url).pathname;

test("doctor: no driver: exit 1, saying why", async () => {
  const r = await runScript(cli, ["doctor"], { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" });
  assertSame(r.code, 1, r.stdout + r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert(lines[0]!.startsWith("runtime: "), `the runtime first: ${lines[0]}`);
  assert(lines.some((l) => /^library: \/.*libmtc\.so$/.test(l)), `the library's file:\n${r.stdout}`);
  assertSame(
    lines.at(-1),
    "FAIL: a copy to a GPU would not work here: could not load the CUDA driver /nonexistent/libcuda.so.1: " +
      "/nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory",
  );
}, { timeout: 60_000 });

test("doctor: two emulated devices: exit 0, each device, the peer-access matrix, the probe", async () => {
  const r = await runScript(cli, ["doctor"], { FAKE_CUDA_DEVICE_COUNT: "2", FAKE_CUDA_DEVICE_MEMORY_BYTES: "3g" });
  assertSame(r.code, 0, r.stdout + r.stderr);
  const lines = r.stdout.trim().split("\n");
  for (const want of ["devices: 2", "  cuda:0  Emulated GPU 0, 3.0 GiB", "  cuda:1  Emulated GPU 1, 3.0 GiB", "  cuda:0  -       yes", "  cuda:1  yes     -"]) {
    assert(lines.some((l) => l.trimEnd() === want), `a line "${want}":\n${r.stdout}`);
  }
  assert(lines.some((l) => /^driver: \/.*, CUDA 13\.0$/.test(l)), `the driver's file and version:\n${r.stdout}`);
  assert(lines.some((l) => /^pinned staging: limit \d/.test(l)), `the pinned limit:\n${r.stdout}`);
  for (const way of ["host -> device", "device -> host"]) {
    assert(lines.some((l) => new RegExp(`^  ${way}: [\\d.]+ GB/s from pageable memory, floor [\\d.]+ GB/s`).test(l)), `the probe, ${way}:\n${r.stdout}`);
  }
  assertSame(lines.at(-1), "ok: copies to and from cuda:0 work");

  const apart = await runScript(cli, ["doctor", "--no-probe"], { FAKE_CUDA_DEVICE_COUNT: "2", FAKE_CUDA_NO_PEER: "1" });
  assertSame(apart.code, 0, apart.stdout + apart.stderr);
  assert(apart.stdout.split("\n").some((l) => l.trimEnd() === "  cuda:0  -       no"), `no peer access:\n${apart.stdout}`);
  assert(!apart.stdout.includes("bandwidth probe"), "--no-probe leaves the probe out");
}, { skip: skipWithoutDriver, timeout: 60_000 });

test("doctor: an unknown command or option is a usage error", async () => {
  for (const [args, said] of [[["docter"], "unknown command: docter"], [["doctor", "--fast"], "unknown option: --fast"]] as const) {
    const r = await runScript(cli, [...args], {});
    assertSame(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert(r.stderr.startsWith(said) && r.stderr.includes("usage: multi-tensor-copier doctor [--no-probe]"), r.stderr);
  }
}, { timeout: 60_000 });
