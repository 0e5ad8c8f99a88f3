// Processes that end, and buffers that shrink or go, while the library is
// still reading host leaves (emulated driver, copies slowed down so that
// staging lasts): each in a child process of the runtime under test.
// - end_while_staging: an uncaught error, an unhandled rejection, an error
//   thrown by the module, an exit(1), a handled SIGTERM. Each must print the
//   user's error and exit 1, never die by a signal (Deno used to crash with
//   SIGSEGV in most such runs: it frees its heap on the way out).
// - resize_while_staging: resizable buffers shrunk or transferred, growable
//   shared ones grown, fixed-length ones transferred and kept, all while
//   their copies stage: no crash, and each copy holds the bytes of startCopy.
// tests/gpu/exit.test.ts runs the same children against the real driver.
import { cudaDeviceCount } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, note, runner, test } from "./harness.ts";
import { type ChildLoad, endWhileStaging, type EndMode, type ResizeMode, resizeWhileStaging } from "./fixtures/in_flight.ts";

const skip = skipWithoutDriver;

/** 128 MiB in 64 leaves; each emulated DMA takes 1 ms, so staging lasts well past 20 ms. */
const END_LOAD: ChildLoad = { leaves: 64, mib: 2, waitMs: 20, vars: { FAKE_CUDA_COPY_DELAY_US: "1000", FAKE_CUDA_QUIET: "1" } };
const RESIZE_LOAD: ChildLoad = { leaves: 32, mib: 2, waitMs: 5, vars: { FAKE_CUDA_COPY_DELAY_US: "1000", FAKE_CUDA_QUIET: "1" } };

/** Runs of each way out: the crash was a race, so the common ways run ten times. */
const END_RUNS: Record<EndMode, number> = { "throw": 10, "reject": 10, "top-level": 3, "exit": 3, "signal": 3 };

for (const mode of Object.keys(END_RUNS) as EndMode[]) {
  test(`exit: a script that ends by "${mode}" while copies stage prints its error and exits 1 (${END_RUNS[mode]} runs)`, async () => {
    assert(cudaDeviceCount() >= 1, "needs cuda:0");
    const inFlight = await endWhileStaging(mode, END_RUNS[mode], END_LOAD);
    note(`exit (${runner}): "${mode}" ${inFlight.length} runs, exit code 1 each; copies in flight when the child counted: ${inFlight.join(", ")}`);
  }, { skip, timeout: 120_000 });
}

const RESIZE_RUNS: Record<ResizeMode, number> = { "shrink": 3, "transfer": 3, "grow-shared": 2, "transfer-kept": 2 };

for (const mode of Object.keys(RESIZE_RUNS) as ResizeMode[]) {
  test(`exit: buffers changed by "${mode}" while their copies stage: no crash, every copy exact (${RESIZE_RUNS[mode]} runs)`, async () => {
    await resizeWhileStaging(mode, RESIZE_RUNS[mode], RESIZE_LOAD);
    note(`exit (${runner}): "${mode}" while staging, ${RESIZE_RUNS[mode]} runs of ${RESIZE_LOAD.leaves} copies: exact, no crash`);
  }, { skip, timeout: 120_000 });
}
