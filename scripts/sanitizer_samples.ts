/**
 * Sample logs for scripts/sanitizer_log.ts's self-test (`--selftest`, which
 * the GPU host's sanitizer mode runs before it starts the tool, and
 * tests/ts/sanitizer_log.test.ts), written by hand in compute-sanitizer's
 * format as CUDA 13.0's tool prints it: the "=========" prefix, one record a
 * top-level line with its details indented below, one ERROR SUMMARY (or
 * RACECHECK SUMMARY) per process.
 *
 * @module
 */

/** A log, the run it stands for, and what the parser must make of it. */
export interface Sample {
  name: string;
  tool: string;
  run: string;
  exitCode: number;
  log: string;
  ok: boolean;
  /** Errors counted, allowed API errors, hazards. */
  counted: number;
  allowed: number;
  hazards: number;
}

/** Hand-written logs in compute-sanitizer's format, and what each must give. */
export const SAMPLES: Sample[] = [
  {
    name: "a clean memcheck run",
    tool: "memcheck",
    run: "memcheck:c/test_device",
    exitCode: 0,
    log: "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n",
    ok: true,
    counted: 0,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "expected API errors only",
    tool: "memcheck",
    run: "memcheck:gpu/kernels.test.ts",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      '========= Program hit CUDA_ERROR_INVALID_PTX (error 218) due to "a PTX JIT compilation failed" on CUDA API call to cuModuleLoadDataEx.',
      "=========     Saved host backtrace up to driver entry point at error",
      "=========         Host Frame: mtc_module_load [0x1c2f3] in libmtc.so",
      "=========",
      '========= Program hit CUDA_ERROR_NOT_FOUND (error 500) due to "named symbol not found" on CUDA API call to cuModuleGetFunction.',
      "=========     Saved host backtrace up to driver entry point at error",
      "=========",
      '========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuLaunchKernel_ptsz.',
      "=========",
      "========= ERROR SUMMARY: 3 errors",
    ].join("\n"),
    ok: true,
    counted: 0,
    allowed: 3,
    hazards: 0,
  },
  {
    name: "an allowed API error outside the runs it is allowed for",
    tool: "memcheck",
    run: "memcheck:c/test_into",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      '========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuLaunchKernel.',
      "========= ERROR SUMMARY: 1 error",
    ].join("\n"),
    ok: false,
    counted: 1,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "an out-of-bounds write next to expected errors, in a child process too",
    tool: "memcheck",
    run: "memcheck:gpu/copy_into.test.ts",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      "========= Invalid __global__ write of size 16 bytes",
      "=========     at mtc_scatter_segments+0x2f0",
      "=========     by thread (31,0,0) in block (2,0,0)",
      "=========     Access at 0x7f3a00001000 is out of bounds",
      "=========     and is 1 bytes after the nearest allocation at 0x7f3a00000000 of size 4096 bytes",
      "=========     Saved host backtrace up to driver entry point at kernel launch time",
      "=========",
      '========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuEventSynchronize.',
      "=========",
      '========= Program hit CUDA_ERROR_NOT_READY (error 600) due to "device not ready" on CUDA API call to cuEventQuery.',
      "=========",
      "========= ERROR SUMMARY: 3 errors",
      "========= Target application terminated before first instrumented API call",
      "========= ERROR SUMMARY: 0 errors",
    ].join("\n"),
    ok: false,
    counted: 2,
    allowed: 1,
    hazards: 0,
  },
  {
    name: "more errors reported than shown",
    tool: "memcheck",
    run: "memcheck:c/test_device",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      '========= Program hit CUDA_ERROR_NOT_READY (error 600) due to "device not ready" on CUDA API call to cuEventQuery.',
      "========= ERROR SUMMARY: 4 errors",
    ].join("\n"),
    ok: false,
    counted: 3,
    allowed: 1,
    hazards: 0,
  },
  {
    name: "a record that wraps onto the next line",
    tool: "memcheck",
    run: "memcheck:gpu/faults.test.ts",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      '========= Program hit CUDA_ERROR_OUT_OF_MEMORY (error 2) due to "out of memory"',
      "=========     on CUDA API call to cuMemAlloc_v2.",
      "========= ERROR SUMMARY: 1 error",
    ].join("\n"),
    ok: true,
    counted: 0,
    allowed: 1,
    hazards: 0,
  },
  {
    name: "a clean racecheck run",
    tool: "racecheck",
    run: "racecheck:c/test_kernels",
    exitCode: 0,
    log: "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n",
    ok: true,
    counted: 0,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "a shared-memory race",
    tool: "racecheck",
    run: "racecheck:gpu/copy_into.test.ts",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      "========= Error: Race reported between Write access at mtc_copy_segments+0x140",
      "=========     and Read access at mtc_copy_segments+0xe0 [4 hazards]",
      "=========",
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)",
    ].join("\n"),
    ok: false,
    counted: 0,
    allowed: 0,
    hazards: 1,
  },
  {
    name: "a hazard in racecheck's hazard form",
    tool: "racecheck",
    run: "racecheck:c/test_into",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      "========= Error: Potential WAR hazard detected at __shared__ 0x40 in block (3,0,0) :",
      "=========     Read Thread (12,0,0) at mtc_scatter_segments+0x1a0",
      "=========     Write Thread (44,0,0) at mtc_scatter_segments+0x2b0",
      "=========",
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)",
    ].join("\n"),
    ok: false,
    counted: 0,
    allowed: 0,
    hazards: 1,
  },
  {
    name: "a note of the tool's own, in a clean run",
    tool: "racecheck",
    run: "racecheck:gpu/kernels.test.ts",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      "========= Warning: racecheck does not check kernels launched before it attached",
      "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)",
    ].join("\n"),
    ok: true,
    counted: 0,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "the tool could not attach",
    tool: "memcheck",
    run: "memcheck:gpu/gpu.test.ts",
    exitCode: 0,
    log: "========= COMPUTE-SANITIZER\n========= Error: No attachable process found. compute-sanitizer timed-out.\n",
    ok: false,
    counted: 0,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "a clean log of a run whose tests failed",
    tool: "memcheck",
    run: "memcheck:gpu/gpu.test.ts",
    exitCode: 1,
    log: "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n",
    ok: false,
    counted: 0,
    allowed: 0,
    hazards: 0,
  },
  {
    name: "a leak, with leak checking on",
    tool: "memcheck",
    run: "memcheck:c/test_staging",
    exitCode: 0,
    log: [
      "========= COMPUTE-SANITIZER",
      "========= Leaked 1024 bytes at 0x7f3a00200000",
      "=========     Saved host backtrace up to driver entry point at allocation time",
      "=========",
      "========= LEAK SUMMARY: 1024 bytes leaked in 1 allocations",
      "========= ERROR SUMMARY: 1 error",
    ].join("\n"),
    ok: false,
    counted: 1,
    allowed: 0,
    hazards: 0,
  },
];
