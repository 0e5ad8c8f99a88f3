// Options: defaults, validation, and the mtc_options layout (checked against the C library).
import { library } from "../../ts/ffi/library.ts";
import { DEFAULT_OPTIONS, MtcError, startCopy } from "../../ts/mod.ts";
import { encodeOptions, OPTIONS_SIZE, resolveOptions } from "../../ts/copy/options.ts";
import { checkLibraryStaysMapped } from "./mapping.ts";
import { assertEquals, assertSame, assertThrows, test } from "./harness.ts";

test("options: accvlab's defaults", () => {
  assertEquals({ ...DEFAULT_OPTIONS }, {
    usePinnedStaging: true,
    packCpuTensors: true,
    minPackedAlignmentBytes: 16,
    maxPackedChunkBytes: 32 * 1024 * 1024,
    useBackgroundThread: true,
    packThresholdBytes: 256 * 1024,
    stagingThreads: 0,
    stagingPieceBytes: 8 * 1024 * 1024,
    strict: false,
    copyHostLeaves: false,
  });
  assertSame(resolveOptions(undefined), DEFAULT_OPTIONS);
  assertSame(resolveOptions({ packCpuTensors: false }).packCpuTensors, false);
  assertSame(resolveOptions({ packCpuTensors: false }).minPackedAlignmentBytes, 16);
});

test("options: out-of-range values are MtcErrors naming the option", () => {
  const bad: [object, string][] = [
    [{ minPackedAlignmentBytes: 4097 }, "minPackedAlignmentBytes = 4097 is out of range: an integer in 1..4096"],
    [{ minPackedAlignmentBytes: 8192 }, "minPackedAlignmentBytes = 8192"],
    [{ minPackedAlignmentBytes: 0 }, "minPackedAlignmentBytes = 0"],
    [{ maxPackedChunkBytes: 0 }, "maxPackedChunkBytes = 0 is out of range: 1 byte .. 1 TiB"],
    [{ maxPackedChunkBytes: 2 ** 40 + 1 }, "maxPackedChunkBytes"],
    [{ stagingPieceBytes: 4095 }, "stagingPieceBytes = 4095 is out of range: an integer >= 4096"],
    [{ stagingThreads: -1 }, "stagingThreads = -1"],
    [{ stagingThreads: 1.5 }, "stagingThreads = 1.5"],
    [{ packThresholdBytes: NaN }, "packThresholdBytes = NaN"],
    [{ usePinnedStaging: 1 }, "option usePinnedStaging must be a boolean, got number"],
    [{ strict: "yes" }, "option strict must be a boolean, got string"],
    [{ copyHostLeaves: 1 }, "option copyHostLeaves must be a boolean, got number"],
    [{ maxPackedChunkBytes: "32M" }, "option maxPackedChunkBytes must be a number, got string"],
    [{ packCpuTensor: true }, 'unknown option "packCpuTensor"'],
  ];
  for (const [options, message] of bad) {
    const e = assertThrows(() => resolveOptions(options as never), MtcError, message);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
    // startCopy checks options even when there is nothing to copy.
    assertThrows(() => startCopy([1, "x"], "cpu", options as never), MtcError, message);
  }
  assertThrows(() => resolveOptions(null as never), MtcError, "options must be an object");
});

test("options: the encoded struct matches mtc_options_init byte for byte", () => {
  checkLibraryStaysMapped();
  const ours = new Uint8Array(OPTIONS_SIZE);
  encodeOptions(DEFAULT_OPTIONS, new DataView(ours.buffer));
  const theirs = new Uint8Array(OPTIONS_SIZE);
  library().symbols.mtc_options_init(theirs);
  assertEquals(ours, theirs);
});

test("options: every field lands at its offset", () => {
  const bytes = new Uint8Array(OPTIONS_SIZE);
  const view = new DataView(bytes.buffer);
  encodeOptions({
    usePinnedStaging: false,
    packCpuTensors: true,
    useBackgroundThread: false,
    minPackedAlignmentBytes: 64,
    maxPackedChunkBytes: 2 ** 40,
    packThresholdBytes: 5 * 2 ** 32 + 7,
    stagingThreads: 3,
    stagingPieceBytes: 8192,
    strict: true, // TypeScript only: nothing in the struct
    copyHostLeaves: true,
  }, view);
  assertSame(view.getUint32(0, true), 56);
  assertSame(view.getUint32(4, true), 0);
  assertSame(view.getUint32(8, true), 1);
  assertSame(view.getUint32(12, true), 0);
  assertSame(view.getBigUint64(16, true), 64n);
  assertSame(view.getBigUint64(24, true), 2n ** 40n);
  assertSame(view.getBigUint64(32, true), 5n * 2n ** 32n + 7n);
  assertSame(view.getUint32(40, true), 3);
  assertSame(view.getUint32(44, true), 0);
  assertSame(view.getBigUint64(48, true), 8192n);
});
