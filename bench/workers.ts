/**
 * The loader's scenarios: example batches made on N worker threads
 * (startLoader, depth 2) → cuda:0, each taken in order on the main thread
 * and disposed; batches per second for each N, beside S5 (prefetch on one
 * thread, depth 2) and its naive and floor columns (one pinned copy of the
 * batch's bytes and a sync per batch), measured in the same run.
 *
 * S5f   S5 with each batch made fresh on the main thread, as the workers do
 * S5w   N workers make the example batch in fresh arrays (bench/worker_batches.ts:
 *       copied from 16 seeded batches; S5wg draws the contents each time, as
 *       examples/example.ts does)
 * S5wa  N workers write it into one of their two arenas, read in place by the copy
 *
 * Also the main thread's part of each batch, timed apart: takeResult and
 * disposeAll of moved example batches (bench/move_worker.ts); and, for
 * parcels of a prepared layout (what the loader's workers send), take +
 * reading each leaf once (its shape and address) + disposeMoved.
 *
 * Each loader row also says where the time went, per batch, from
 * Loader.stats over the timed segments: each worker's time making and
 * copying (out of workers / rate available to it), the consumer's wait for
 * batches to arrive, and its time taking them (copy waits included).
 */
import {
  type CopyOptions,
  type DeviceTensor,
  disposeAll,
  disposeMoved,
  type LoaderStats,
  type LoaderWorkerStats,
  type Moved,
  prefetch,
  startLoader,
  takeResult,
} from "../ts/mod.ts";
import type { ExampleSample } from "../examples/example_batch.ts";
import { getEnv } from "../ts/base/runtime.ts";
import { source } from "./worker_batches.ts";
import { copyExampleBatch } from "../examples/example_batch.ts";
import { rate, type ScenarioResult, type Series } from "./report.ts";
import { type ThreadCpu, threadCpu } from "./thread_cpu.ts";

export interface WorkerBench {
  wanted(id: string): boolean;
  /** Batches in each timed segment. */
  count: number;
  /** Worker counts to run. */
  workerCounts: readonly number[];
  /** S5 of this run: its naive and floor columns are every row's. */
  s5: ScenarioResult;
  summarize(ms: number[]): Series;
}

const PRODUCERS = new URL("./worker_batches.ts", import.meta.url);
/** Batches in flight per worker: MTC_BENCH_LOADER_DEPTH, else 2 (as S5's prefetch). */
const DEPTH = Number(getEnv("MTC_BENCH_LOADER_DEPTH") ?? 2);
/** The workers' copy options: MTC_BENCH_LOADER_OPTIONS (JSON), to compare settings; else the loader's defaults. */
const LOADER_COPY_OPTIONS = JSON.parse(
  getEnv("MTC_BENCH_LOADER_OPTIONS") ?? "{}",
) as CopyOptions;
/** Timed segments of `count` batches each, after the warm-up. */
const SEGMENTS = 3;
/** Batches per worker before timing (fewer for a short run): each worker's JIT warms up on its own. */
const WARM_UP_PER_WORKER = 50;

export async function workerScenarios(
  b: WorkerBench,
): Promise<ScenarioResult[]> {
  const { leaves, bytes, naive, floor } = b.s5;
  const row = (
    id: string,
    what: string,
    perBatchMs: number[],
    extra: Record<string, Series> = {},
  ): ScenarioResult => {
    const library = b.summarize(perBatchMs);
    return {
      id,
      what,
      leaves,
      bytes,
      library,
      naive,
      floor,
      extra: {
        "batches per second (library)": rate(library),
        "batches per second (floor)": rate(floor),
        ...extra,
      },
    };
  };
  const rows = [
    row(
      "S5f",
      `example batches built fresh on one thread, through prefetch (depth ${DEPTH}) → cuda:0`,
      await prefetchFresh(b.count),
    ),
  ];
  const mainThread = await mainThreadPart(Math.min(b.count, 500), b.summarize);
  const variants = [
    ["S5w", "example", "made in fresh arrays"],
    ["S5wg", "generated", "drawn at random in fresh arrays"],
    ["S5wa", "arena", "written into two arenas in turn"],
  ] as const;
  for (const [id, producer, how] of variants) {
    if (!b.wanted(id)) continue;
    for (const workers of b.workerCounts) {
      const what = `example batches ${how} by ${workers} worker${
        workers === 1 ? "" : "s"
      }, startLoader (depth ${DEPTH}) → cuda:0`;
      const { perBatch, spent } = await loaderSegments(
        producer,
        workers,
        b.count,
      );
      rows.push(
        row(
          `${id}×${workers}`,
          what,
          perBatch,
          spentSeries(spent, b.summarize),
        ),
      );
    }
  }
  // Under the first loader row: the same for every worker count.
  if (rows.length > 1) Object.assign(rows[1]!.extra, mainThread);
  return rows;
}

/** Per timed segment, per batch: where the loader's time went (Loader.stats differences). */
interface Spent {
  make: number[];
  copy: number[];
  move: number[];
  creditWait: number[];
  post: number[];
  consumerWait: number[];
  take: number[];
  copyWait: number[];
  /** CPU time per batch (Linux only; empty elsewhere): the main thread, all workers together, the runtime's helper threads. */
  cpuMain: number[];
  cpuWorkers: number[];
  cpuHelpers: number[];
}

/** Ms per batch of each timed segment of one loader, after its warm-up, and where the time went in each. */
async function loaderSegments(
  producer: string,
  workers: number,
  count: number,
): Promise<{ perBatch: number[]; spent: Spent }> {
  const warm = Math.min(WARM_UP_PER_WORKER, count) * workers;
  await using loader = startLoader<unknown>({
    module: PRODUCERS,
    export: producer,
    device: "cuda:0",
    workers,
    depth: DEPTH,
    batches: warm + SEGMENTS * count,
    copyOptions: LOADER_COPY_OPTIONS,
  });
  const spent: Spent = {
    make: [],
    copy: [],
    move: [],
    creditWait: [],
    post: [],
    consumerWait: [],
    take: [],
    copyWait: [],
    cpuMain: [],
    cpuWorkers: [],
    cpuHelpers: [],
  };
  let last: LoaderStats | null = null;
  let lastCpu: ThreadCpu | null = null;
  const onSegment = () => {
    const now = loader.stats;
    const cpu = threadCpu();
    if (lastCpu !== null && cpu !== null) {
      spent.cpuMain.push((cpu.main - lastCpu.main) / count);
      spent.cpuWorkers.push((cpu.workers - lastCpu.workers) / count);
      spent.cpuHelpers.push((cpu.helpers - lastCpu.helpers) / count);
    }
    lastCpu = cpu;
    if (last !== null) {
      const sum = (s: LoaderStats, key: keyof LoaderWorkerStats) =>
        s.workers.reduce((t, w) => t + w[key], 0);
      const made = sum(now, "made") - sum(last, "made");
      const per = (key: keyof LoaderWorkerStats) =>
        (sum(now, key) - sum(last!, key)) / made;
      spent.make.push(per("makeMs"));
      spent.copy.push(per("copyMs"));
      spent.move.push(per("moveMs"));
      spent.creditWait.push(per("creditWaitMs"));
      spent.post.push(per("postMs"));
      const taken = now.taken - last.taken;
      spent.consumerWait.push(
        (now.consumerWaitMs - last.consumerWaitMs) / taken,
      );
      spent.take.push((now.takeMs - last.takeMs) / taken);
      spent.copyWait.push((now.copyWaitMs - last.copyWaitMs) / taken);
    }
    last = now;
  };
  return {
    perBatch: await timeSegments(loader, warm, count, onSegment),
    spent,
  };
}

function spentSeries(
  spent: Spent,
  summarize: (ms: number[]) => Series,
): Record<string, Series> {
  return {
    "a worker's time making a batch": summarize(spent.make),
    "a worker's time starting a batch's copy": summarize(spent.copy),
    "a worker's time moving it (moveResult)": summarize(spent.move),
    "a worker's time waiting for a credit (the consumer behind)": summarize(
      spent.creditWait,
    ),
    "a worker's time in postMessage": summarize(spent.post),
    "consumer: next() waiting for the batch, per batch": summarize(
      spent.consumerWait,
    ),
    "consumer: taking the batch (copy waits included)": summarize(spent.take),
    "consumer: of which waiting for a copy still running": summarize(
      spent.copyWait,
    ),
    ...(spent.cpuMain.length === 0 ? {} : {
      "CPU per batch: the main thread": summarize(spent.cpuMain),
      "CPU per batch: the workers together": summarize(spent.cpuWorkers),
      "CPU per batch: the runtime's helper threads (JIT, GC)": summarize(
        spent.cpuHelpers,
      ),
    }),
  };
}

/** S5 with the batches built fresh on this thread. */
async function prefetchFresh(count: number): Promise<number[]> {
  const warm = Math.min(WARM_UP_PER_WORKER, count);
  function* fresh() {
    for (let i = 0; i < warm + SEGMENTS * count; i++) {
      yield copyExampleBatch(source(i));
    }
  }
  return await timeSegments(
    prefetch(fresh(), "cuda:0", { depth: DEPTH }),
    warm,
    count,
  );
}

/**
 * Takes every batch of `batches` and disposes it (a parcel's per block);
 * returns ms per batch of each segment of `count` after `warm`; calls
 * `onSegment` at each segment's bounds.
 */
async function timeSegments(
  batches: AsyncIterable<unknown>,
  warm: number,
  count: number,
  onSegment?: () => void,
): Promise<number[]> {
  const perBatch: number[] = [];
  let taken = 0;
  let t0 = performance.now();
  for await (const batch of batches) {
    disposeMoved(batch);
    taken++;
    if (taken >= warm && (taken - warm) % count === 0) {
      onSegment?.();
      const now = performance.now();
      if (taken > warm) perBatch.push((now - t0) / count);
      t0 = now;
    }
  }
  return perBatch;
}

/**
 * takeResult and disposeAll of `count` moved example batches, each timed,
 * once all arrived (after as many again, or 300, untimed: the JIT's warm-up).
 */
async function mainThreadPart(
  count: number,
  summarize: (ms: number[]) => Series,
): Promise<Record<string, Series>> {
  const warm = Math.min(300, count);
  const arrived = await movedBatches(warm + count, false);
  const take: number[] = [];
  const dispose: number[] = [];
  arrived.forEach((moved, i) => {
    const t0 = performance.now();
    const batch = takeResult(moved) as DeviceTensor[];
    const t1 = performance.now();
    disposeAll(batch);
    const t2 = performance.now();
    if (i < warm) return;
    take.push(t1 - t0);
    dispose.push(t2 - t1);
  });
  return {
    "main thread per batch: takeResult (timed apart)": summarize(take),
    "main thread per batch: disposeAll (timed apart)": summarize(dispose),
    "main thread per batch: take + dispose": summarize(
      take.map((t, i) => t + dispose[i]!),
    ),
    ...await parcelPart(count, summarize),
  };
}

/** `count` example batches moved by bench/move_worker.ts, once all arrived (`parcels`: as the loader's workers send them). */
async function movedBatches(count: number, parcels: boolean): Promise<Moved[]> {
  const worker = new Worker(new URL("./move_worker.ts", import.meta.url), {
    type: "module",
  });
  const arrived: Moved[] = [];
  await new Promise<void>((resolve) => {
    worker.onmessage = (event: MessageEvent) => {
      if (arrived.push(event.data as Moved) === count) resolve();
    };
    worker.postMessage({ count, parcels });
  });
  worker.terminate(); // the parcels outlive it
  return arrived;
}

/**
 * The main thread's part of a batch that came as a parcel of a prepared
 * layout, each timed: take, then each leaf read once (shape and address,
 * as a training step would hand them on), then disposeMoved (per block).
 */
async function parcelPart(
  count: number,
  summarize: (ms: number[]) => Series,
): Promise<Record<string, Series>> {
  const warm = Math.min(300, count);
  const arrived = await movedBatches(warm + count, true);
  const take: number[] = [];
  const read: number[] = [];
  const dispose: number[] = [];
  let sink = 0;
  arrived.forEach((moved, i) => {
    const t0 = performance.now();
    const batch = takeResult(moved) as ExampleSample[];
    const t1 = performance.now();
    sink += readEachLeaf(batch);
    const t2 = performance.now();
    disposeMoved(batch);
    const t3 = performance.now();
    if (i < warm) return;
    take.push(t1 - t0);
    read.push(t2 - t1);
    dispose.push(t3 - t2);
  });
  if (Number.isNaN(sink)) throw new Error("unreachable"); // keeps the reads
  return {
    "main thread per batch, the engine's floor: 528 objects of a DeviceTensor's 12 fields made, each read once":
      summarize(objectFloor(warm + count).slice(warm)),
    "main thread per batch, parcels: take": summarize(take),
    "main thread per batch, parcels: read each leaf (shape, address)":
      summarize(read),
    "main thread per batch, parcels: disposeMoved": summarize(dispose),
    "main thread per batch, parcels: take + read + dispose": summarize(
      take.map((t, i) => t + read[i]! + dispose[i]!),
    ),
  };
}

/** Each leaf of an example batch on the device, read once: its first extent and its address. */
function readEachLeaf(batch: ExampleSample[]): number {
  let sum = 0;
  const leaf = (t: unknown) => {
    const d = t as DeviceTensor;
    sum += (d.shape[0] ?? 1) + d.address;
  };
  for (const sample of batch) {
    for (const cam of sample.cams_gt) {
      leaf(cam.bounding_boxes);
      leaf(cam.class_ids);
      leaf(cam.active);
      leaf(cam.depths);
      leaf(cam.proj_mat);
    }
    leaf(sample.gt_data.bounding_boxes_3d);
    leaf(sample.gt_data.class_ids);
    leaf(sample.gt_data.active);
  }
  return sum;
}

/** An object with as many private fields as a DeviceTensor, and its two getters the read uses. */
class Bare {
  #address: number;
  #shape: readonly number[];
  #dtype: string;
  #device: number;
  #byteLength: number;
  #block: number;
  #offset: number;
  #packed: boolean;
  #holder: object | null;
  #disposed = false;
  #keepsTensor: boolean;
  #group: { disposed: boolean } | null;
  constructor(
    address: number,
    shape: readonly number[],
    group: { disposed: boolean },
  ) {
    this.#address = address;
    this.#shape = shape;
    this.#dtype = "float32";
    this.#device = 0;
    this.#byteLength = 48;
    this.#block = 1;
    this.#offset = address;
    this.#packed = true;
    this.#holder = null;
    this.#keepsTensor = false;
    this.#group = group;
  }
  get address(): number {
    if (this.#disposed || (this.#group !== null && this.#group.disposed)) {
      throw new Error("disposed");
    }
    return this.#address;
  }
  get shape(): readonly number[] {
    return this.#shape;
  }
}

/**
 * The engine's own cost of what the take and the read cannot avoid: 528
 * objects like a DeviceTensor made and each read once (shape, address), ms
 * per batch, `rounds` times; no library call.
 */
function objectFloor(rounds: number): number[] {
  const shape = Object.freeze([4, 3]);
  const group = { disposed: false };
  const perRound: number[] = [];
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    const made = new Array<Bare>(528);
    for (let i = 0; i < 528; i++) made[i] = new Bare(i * 64, shape, group);
    for (let i = 0; i < 528; i++) sink += made[i]!.shape[0]! + made[i]!.address;
    perRound.push(performance.now() - t0);
  }
  if (Number.isNaN(sink)) throw new Error("unreachable"); // keeps the reads
  return perRound;
}
