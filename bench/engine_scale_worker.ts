/**
 * One worker of bench/engine_scale.ts: runs `op` 528 times a round for `ms`
 * milliseconds, with no library call, and posts how many rounds it did.
 */
const scope = globalThis as unknown as {
  onmessage: ((event: { data: { op: string; ms: number } }) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = ({ data: { op, ms } }) => {
  const buffer = new ArrayBuffer(1 << 20);
  let sink = 0;
  let rounds = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 528; i++) {
      if (op === "views") {
        sink += new Float32Array(buffer, (i * 64) & 0xfffc0, 8).length;
      } else if (op === "objects") {
        sink += ({ a: i, b: sink, c: rounds, d: 1, e: 2, f: 3 }).a;
      } else sink = (sink * 31 + i) | 0;
    }
    rounds++;
  }
  scope.postMessage({ rounds, sink });
};
