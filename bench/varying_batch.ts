/**
 * Batches that vary (scenario S6): a structure of its own on every call.
 * The sample count is drawn (48 to 80), each camera's object count too (0 to
 * 80, a tenth of them 0), optional keys are present or not (`occlusion` per
 * camera, `velocity` per sample, `lidar` per sample), and strings and
 * numbers sit beside the tensors. About 2,100 leaves a batch, as the example
 * batch's cameras and ground truth are made.
 *
 * @module
 */

import { seededRandom } from "../examples/example_batch.ts";
import { Tensor } from "../ts/mod.ts";

function floats(n: number, random: () => number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = random();
  return a;
}

/** One batch of the S6 kind, from `seed`. */
export function makeVaryingBatch(seed: number): Record<string, unknown>[] {
  const random = seededRandom(seed);
  const count = (n: number) => (random() < 0.1 ? 0 : Math.floor(random() * (n + 1)));
  const samples = 48 + Math.floor(random() * 33);
  return Array.from({ length: samples }, (_, s) => {
    const cams_gt = Array.from({ length: 6 }, (_, c) => {
      const n = count(80);
      const camera: Record<string, unknown> = {
        name: `cam${c}`,
        bounding_boxes: new Tensor(floats(n * 4, random), [n, 4]),
        class_ids: new BigInt64Array(n),
        active: new Tensor(new Uint8Array(n), [n], "bool"),
        depths: floats(n, random),
        proj_mat: new Tensor(floats(12, random), [3, 4]),
        exposure: random(),
      };
      if (random() < 0.5) camera.occlusion = floats(n, random);
      return camera;
    });
    const N = count(120);
    const gt_data: Record<string, unknown> = {
      bounding_boxes_3d: new Tensor(floats(N * 7, random), [N, 7]),
      class_ids: new BigInt64Array(N),
      active: new Tensor(new Uint8Array(N), [N], "bool"),
    };
    if (random() < 0.5) gt_data.velocity = new Tensor(floats(N * 2, random), [N, 2]);
    const sample: Record<string, unknown> = { id: `sample-${seed}-${s}`, timestamp: seed * 1000 + s, cams_gt, gt_data };
    if (random() < 0.3) {
      const points = 1 + Math.floor(random() * 64);
      sample.lidar = new Tensor(floats(points * 3, random), [points, 3]);
    }
    return sample;
  });
}
