// minPackedAlignmentBytes takes any integer from 1 to 4096, as accvlab does:
// each packed leaf starts at a multiple of roundUp(max(a, element size),
// element size). Checked through the emulated driver for alignments 1, 3, 6,
// 16 and 100 and every dtype: the offset of every packed leaf in its block
// (from the DeviceTensors' addresses) and every byte after the round trip.
import { type DeviceTensor, disposeAll, startCopy } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertSame, test } from "./harness.ts";
import { bytesOf, DTYPES, elementSize, randomLeaf } from "./random_tensors.ts";

const roundUp = (n: number, to: number) => Math.ceil(n / to) * to;

test("alignment: any minPackedAlignmentBytes from 1 to 4096, packed leaves placed by accvlab's rule, bytes exact", async () => {
  for (const alignment of [1, 3, 6, 16, 100]) {
    // Every dtype twice, with odd lengths, so each leaf starts after an odd end.
    const inputs = [...DTYPES, ...DTYPES].map((dtype, i) => randomLeaf(dtype, [1 + (i * 7) % 13], 500 + i + alignment));
    const dtypes = [...DTYPES, ...DTYPES];
    const onGpu = (await startCopy(inputs, "cuda:0", { minPackedAlignmentBytes: alignment })) as DeviceTensor[];
    let end = 0;
    const base = BigInt(onGpu[0]!.address);
    for (const [i, t] of onGpu.entries()) {
      const size = elementSize(dtypes[i]!);
      const rule = roundUp(Math.max(alignment, size), size);
      const offset = i === 0 ? 0 : roundUp(end, rule);
      assertSame(Number(BigInt(t.address) - base), offset, `alignment ${alignment}, leaf ${i} (${dtypes[i]}): its offset in the block`);
      end = offset + t.byteLength;
      const back = bytesOf(t.toHost());
      const expected = bytesOf(inputs[i]!);
      assertSame(back.length, expected.length, `alignment ${alignment}, leaf ${i}: byte length`);
      for (let k = 0; k < back.length; k++) {
        if (back[k] !== expected[k]) assertSame(back[k], expected[k], `alignment ${alignment}, leaf ${i}, byte ${k}`);
      }
    }
    disposeAll(onGpu);
  }
}, { skip: skipWithoutDriver });
