// The producer of tests/package/loader_smoke.ts: batch i holds four floats
// equal to i; there are six.
export default function batch(index: number): { index: number; values: Float32Array } | undefined {
  return index < 6 ? { index, values: new Float32Array(4).fill(index) } : undefined;
}
