/**
 * The JavaScript side of one `mtc_block`: a count of the DeviceTensors (and
 * in-flight copies) that use it, holding one C reference between them.
 *
 * @module
 */

import { library } from "../ffi/library.ts";

/**
 * Backstop for blocks whose DeviceTensors were all dropped without
 * dispose(): a holder is referenced only by its tensors (and by copies that
 * read it), so it becomes unreachable with the last of them. One
 * registration per block, not per tensor: registering costs ~0.2 µs in Bun.
 */
const registry = new FinalizationRegistry<number>((block) => library().symbols.mtc_block_release(block));

/**
 * One C reference to an mtc_block, shared by JS users. Created with the C
 * reference already taken (mtc_block_retain once per distinct block) and no
 * shares; the last drop() calls mtc_block_release once.
 */
export class BlockHolder {
  /** The mtc_block pointer, as a number. */
  readonly block: number;
  #shares = 0;

  /** Takes one C reference on `block` (an mtc_block pointer) and registers the backstop. */
  constructor(block: number) {
    this.block = block;
    library().symbols.mtc_block_retain(block);
    registry.register(this, block, this);
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
      library().symbols.mtc_block_release(this.block);
    }
  }
}
