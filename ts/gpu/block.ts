/**
 * The JavaScript side of one `mtc_block`: a count of the DeviceTensors (and
 * in-flight copies) that use it, holding one C reference between them.
 *
 * @module
 */

import { releaseBlockRef, retainBlockRef } from "../ffi/owner.ts";

/**
 * Backstop for blocks whose DeviceTensors were all dropped without
 * dispose(): a holder is referenced only by its tensors (and by copies that
 * read it), so it becomes unreachable with the last of them. One
 * registration per block, not per tensor: registering costs ~0.2 µs in Bun.
 */
const registry = new FinalizationRegistry<number>(releaseBlockRef);

/**
 * One C reference to an mtc_block, shared by JS users: a ref of this
 * thread's owner (ffi/owner.ts), taken once per distinct block, with no
 * shares; the last drop() releases it.
 */
export class BlockHolder {
  /** The mtc_block pointer, as a number. */
  readonly block: number;
  /** The owner's ref for the C reference. */
  readonly ref: number;
  #shares = 0;

  /**
   * Takes one C reference on `block` (an mtc_block pointer), or adopts
   * `ref`, one this thread holds already (a moved result's), and registers
   * the backstop.
   */
  constructor(block: number, ref?: number) {
    this.block = block;
    this.ref = ref ?? retainBlockRef(block);
    registry.register(this, this.ref, this);
  }

  /** Current number of shares (for tests). */
  get shares(): number {
    return this.#shares;
  }

  /** Adds a share. */
  acquire(): void {
    if (this.#shares < 0) throw new Error("BlockHolder used after release");
    this.#shares++;
  }

  /** Drops a share; the last one releases the C reference. */
  drop(): void {
    if (--this.#shares === 0) {
      this.#shares = -1;
      registry.unregister(this);
      releaseBlockRef(this.ref);
    }
  }
}
