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
  /** Milliseconds starting the copies (a prepared copy's check and submit; staging on this thread included). */
  readonly copyMs: number;
  /** Milliseconds moving them (moveResult: a copy running moves once staged; others are waited for). */
  readonly moveMs: number;
  /** Milliseconds waiting for leave to make the next batch (the consumer was behind). */
  readonly creditWaitMs: number;
  /** Milliseconds in postMessage, sending the batches. */
  readonly postMs: number;
}

/** {@link Loader.stats}: batches so far, and where the time went. */
export interface LoaderStats {
  /** Batches the workers sent that reached this thread (a producer's error included; a producer module that failed to load is none). */
  readonly made: number;
  /** Batches handed to the consumer. */
  readonly taken: number;
  /** Batches the workers may make now and have not sent yet (the credits they hold, within the stream): 0 once the stream ended or the loader closed. */
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

/** Times a worker sends with each batch (loader_worker.ts). */
const TIMES = 5;

/** The counters behind LoaderStats. */
export class LoaderCounters {
  made = 0;
  taken = 0;
  consumerWaitMs = 0;
  takeMs = 0;
  copyWaitMs = 0;
  /** Per worker: credits given, messages of batches received, batches made (those messages less a module that failed to load). */
  readonly granted: number[] = [];
  readonly sent: number[] = [];
  readonly madeBy: number[] = [];
  /** Per worker: the times its messages said, in TIMES order, summed. */
  readonly times: Float64Array[] = [];

  constructor(workers: number) {
    for (let w = 0; w < workers; w++) {
      this.granted.push(0);
      this.sent.push(0);
      this.madeBy.push(0);
      this.times.push(new Float64Array(TIMES));
    }
  }

  /**
   * Worker `w` sent a batch, with what it spent on it (make, copy, move,
   * credit wait, the previous post); `made` false: its producer module
   * failed to load, and it made nothing.
   */
  batch(w: number, times: unknown, made: boolean): void {
    this.sent[w]!++;
    if (!made) return;
    this.made++;
    this.madeBy[w]!++;
    if (!Array.isArray(times)) return;
    const sums = this.times[w]!;
    for (let i = 0; i < TIMES; i++) {
      const ms: unknown = times[i];
      if (typeof ms === "number" && ms >= 0) sums[i]! += ms; // our own worker's numbers; anything else counts as nothing
    }
  }

  /** The stats now; `left`: batches of the stream not yet taken (0 once it ended or closed, Infinity when it has no end). */
  snapshot(waiting: number, left: number): LoaderStats {
    let inFlight = 0;
    const workers: LoaderWorkerStats[] = [];
    for (let w = 0; w < this.granted.length; w++) {
      inFlight += Math.max(0, this.granted[w]! - this.sent[w]!);
      const t = this.times[w]!;
      workers.push({ made: this.madeBy[w]!, makeMs: t[0]!, copyMs: t[1]!, moveMs: t[2]!, creditWaitMs: t[3]!, postMs: t[4]! });
    }
    return {
      made: this.made,
      taken: this.taken,
      inFlight: Math.min(inFlight, Math.max(0, left - waiting)), // credits past the stream's end make nothing
      waiting,
      consumerWaitMs: this.consumerWaitMs,
      takeMs: this.takeMs,
      copyWaitMs: this.copyWaitMs,
      workers,
    };
  }
}
