/**
 * What a loader (ts/thread/loader.ts) counts as it runs: a few additions
 * and clock reads per batch, cheap enough to leave on. `Loader.stats`
 * gives a copy.
 *
 * @module
 */

/** One worker's part, from the times it sends with each batch. */
export interface LoaderWorkerStats {
  /** Batches it sent (errors included). */
  readonly made: number;
  /** Milliseconds in the producer's calls (making batches). */
  readonly makeMs: number;
  /** Milliseconds starting the copies and moving them (its staging included; the DMA runs on after it). */
  readonly copyMs: number;
}

/** {@link Loader.stats}: batches so far, and where the time went. */
export interface LoaderStats {
  /** Batches the workers sent that reached this thread. */
  readonly made: number;
  /** Batches handed to the consumer. */
  readonly taken: number;
  /** Batches the workers may make now and have not sent yet (the credits they hold). */
  readonly inFlight: number;
  /** Batches that arrived and wait for the consumer's next(). */
  readonly waiting: number;
  /** Milliseconds next() calls waited for their batch to arrive. */
  readonly consumerWaitMs: number;
  /** Milliseconds taking batches on this thread (copy waits included): the consumer's own cost. */
  readonly takeMs: number;
  /** Of takeMs, the milliseconds spent waiting for copies still running when their batch was taken. */
  readonly copyWaitMs: number;
  /** Per worker. */
  readonly workers: readonly LoaderWorkerStats[];
}

/** The counters behind LoaderStats. */
export class LoaderCounters {
  made = 0;
  taken = 0;
  consumerWaitMs = 0;
  takeMs = 0;
  copyWaitMs = 0;
  /** Per worker: credits given, batches sent, time making, time copying. */
  readonly granted: number[] = [];
  readonly sent: number[] = [];
  readonly makeMs: number[] = [];
  readonly copyMs: number[] = [];

  constructor(workers: number) {
    for (let w = 0; w < workers; w++) {
      this.granted.push(0);
      this.sent.push(0);
      this.makeMs.push(0);
      this.copyMs.push(0);
    }
  }

  /** Worker `w` sent a batch that took it `makeMs` to make and `copyMs` to copy and move. */
  batch(w: number, makeMs: unknown, copyMs: unknown): void {
    this.made++;
    this.sent[w]!++;
    // Plain numbers from our own worker; anything else counts as nothing.
    if (typeof makeMs === "number" && makeMs >= 0) this.makeMs[w]! += makeMs;
    if (typeof copyMs === "number" && copyMs >= 0) this.copyMs[w]! += copyMs;
  }

  snapshot(waiting: number): LoaderStats {
    let inFlight = 0;
    const workers: LoaderWorkerStats[] = [];
    for (let w = 0; w < this.granted.length; w++) {
      inFlight += Math.max(0, this.granted[w]! - this.sent[w]!);
      workers.push({ made: this.sent[w]!, makeMs: this.makeMs[w]!, copyMs: this.copyMs[w]! });
    }
    return {
      made: this.made,
      taken: this.taken,
      inFlight,
      waiting,
      consumerWaitMs: this.consumerWaitMs,
      takeMs: this.takeMs,
      copyWaitMs: this.copyWaitMs,
      workers,
    };
  }
}
