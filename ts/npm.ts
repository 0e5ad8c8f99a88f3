/**
 * The npm package's entry (dist/mod.js): the exports of ts/mod.ts, as the
 * first copy of this version in this realm registered them. A second copy
 * of the same version (a second install, `npm:` beside `node_modules`, the
 * loader's worker script, which registers first in its worker) thus hands
 * out the first one's classes: one class identity, one pinned-buffer map,
 * one libmtc. The package's declarations are ts/mod.ts's (dist/types): the
 * names here are the same, which tests/ts/second_copy.test.ts checks.
 *
 * @module
 */

// First: outside Bun and Deno, the import stops here, saying so.
import "./base/supported_runtime.ts";
import { adoptCopy } from "./base/copy_identity.ts";
import * as own from "./mod.ts";

const shared: typeof own = adoptCopy(own);

export const {
  Arena,
  AsyncCopyHandle,
  clearTransferStreams,
  copyInto,
  CudaEvent,
  cudaDeviceCount,
  cudaUnavailableReason,
  currentStream,
  DEFAULT_OPTIONS,
  deleteDLPack,
  DeviceTensor,
  disposeAll,
  disposeMoved,
  dropMoved,
  dropMovedFrom,
  DTYPES,
  fromDLPack,
  hasKernels,
  Identity,
  isDevice,
  isMoved,
  isPinnedHostOutput,
  Kernel,
  libraryVersion,
  Loader,
  Module,
  movedError,
  moveResult,
  MtcError,
  ownerAlive,
  parseDevice,
  pinnedArray,
  pinnedTensor,
  poolStats,
  prefetch,
  prepareCopy,
  prepareCopyInto,
  PreparedCopy,
  PreparedCopyInto,
  releaseDLPack,
  releaseHostOutput,
  setPinnedHeldLimit,
  setPinnedPoolLimit,
  settleLaunches,
  startArenaCopy,
  startCopy,
  startLoader,
  Status,
  Stream,
  takeResult,
  Tensor,
  threadOwner,
  toDLPack,
  ToDevice,
  transferStream,
  trimPools,
  warmUp,
  withStream,
} = shared;
