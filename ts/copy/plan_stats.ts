/**
 * What one copy did (mtc_plan_stats), as a camelCase object.
 *
 * @module
 */

/** How device-to-host leaves were copied (mtc_plan_stats.device_to_host_path). */
export type DeviceToHostPath = "none" | "per-leaf" | "batched" | "gather-kernel";

const PATHS: readonly DeviceToHostPath[] = ["none", "per-leaf", "batched", "gather-kernel"];

/**
 * The counters of one copy (`AsyncCopyHandle.stats()`). Final once the copy
 * is over (`ready()` is true). `leaves` and `leavesReused` include the
 * leaves the TypeScript side found already on the target, which never reach
 * the C plan.
 */
export interface PlanStats {
  /** Tensor leaves in the batch. */
  leaves: number;
  /** Leaves already on the target: not copied (the same object comes back). */
  leavesReused: number;
  /** Leaves copied as part of a packed chunk. */
  leavesPacked: number;
  /** Packed chunks. */
  chunks: number;
  /** Blocks made (chunks and leaves with their own). */
  blocks: number;
  /** Bytes of leaves copied. */
  bytesCopied: number;
  /** DMA and kernel submissions. */
  copiesIssued: number;
  /** Staging buffers taken from the pinned pool. */
  pinnedReuses: number;
  /** Staging buffers newly allocated (cuMemHostAlloc). */
  pinnedAllocations: number;
  /** Host time spent staging (memcpy into pinned memory), in nanoseconds. */
  stagingNs: number;
  /** Host time from submit to the last enqueue, in nanoseconds. */
  submitNs: number;
  /** How device-to-host leaves were copied; "none" when there were none. */
  deviceToHostPath: DeviceToHostPath;
  /** Leaves read or written in place in pinned memory of the library's (pinned tensors, arenas, pinned outputs): no staging. */
  leavesDirect: number;
  /** Bytes memcpy'd into pinned staging (0 when every host leaf was pinned). */
  bytesStaged: number;
}

/** sizeof(mtc_plan_stats): two uint32 and thirteen uint64. */
export const PLAN_STATS_SIZE = 112;

/** Stats of a copy that needed no plan: every leaf (if any) was already on the target. */
export function reusedOnlyStats(reused: number): PlanStats {
  return {
    leaves: reused,
    leavesReused: reused,
    leavesPacked: 0,
    chunks: 0,
    blocks: 0,
    bytesCopied: 0,
    copiesIssued: 0,
    pinnedReuses: 0,
    pinnedAllocations: 0,
    stagingNs: 0,
    submitNs: 0,
    deviceToHostPath: "none",
    leavesDirect: 0,
    bytesStaged: 0,
  };
}

/** Decodes an mtc_plan_stats (little-endian) and adds the leaves reused on the TypeScript side. */
export function decodePlanStats(bytes: Uint8Array, reused: number): PlanStats {
  const view = new DataView(bytes.buffer, bytes.byteOffset, PLAN_STATS_SIZE);
  const u64 = (offset: number) => view.getUint32(offset, true) + view.getUint32(offset + 4, true) * 4294967296;
  return {
    leaves: u64(8) + reused,
    leavesReused: u64(16) + reused,
    leavesPacked: u64(24),
    chunks: u64(32),
    blocks: u64(40),
    bytesCopied: u64(48),
    copiesIssued: u64(56),
    pinnedReuses: u64(64),
    pinnedAllocations: u64(72),
    stagingNs: u64(80),
    submitNs: u64(88),
    deviceToHostPath: PATHS[view.getUint32(4, true)] ?? "none",
    leavesDirect: u64(96),
    bytesStaged: u64(104),
  };
}
