/**
 * The DeviceTensors of one prepared copy's result, disposed together: the
 * group holds one share of each block the copy made, so that disposing the
 * whole result costs one step per block, not per leaf (prepared.ts). Each
 * leaf reads the group's state: once it is disposed, every leaf is.
 *
 * @module
 */

import type { BlockHolder } from "../gpu/block.ts";

export class ResultGroup {
  /** True once the whole result was disposed (or its last leaf was, one by one). */
  disposed = false;
  #holders: BlockHolder[];
  /** Leaves not yet disposed one by one: the last one disposes the group. */
  #live: number;

  /** Takes one share of each of `holders` (distinct blocks) for `leaves` leaves. */
  constructor(holders: BlockHolder[], leaves: number) {
    for (const holder of holders) holder.acquire();
    this.#holders = holders;
    this.#live = leaves;
  }

  /** Drops the group's share of each block. Idempotent. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const holders = this.#holders;
    this.#holders = [];
    for (const holder of holders) holder.drop();
  }

  /** One leaf was disposed on its own (DeviceTensor#dispose, disposeAll). */
  leafDisposed(): void {
    if (--this.#live === 0) this.dispose();
  }
}
