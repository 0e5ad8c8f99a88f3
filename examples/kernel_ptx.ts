/**
 * Two small CUDA kernels as PTX text, for examples/kernel.ts and the tests:
 * the driver compiles PTX for the GPU it runs on, so no CUDA toolkit is
 * needed at run time. PTX ISA 8.0 for sm_80 (A100) and later: any driver
 * since CUDA 12.0 compiles it, for Ampere, Hopper and newer GPUs.
 *
 * Their CUDA C source:
 *
 * ```cuda
 * extern "C" __global__ void scale_add_f32(const float *x, float *y, float a, float b, unsigned n) {
 *   unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
 *   if (i < n) y[i] = a * x[i] + b;
 * }
 * extern "C" __global__ void add_one_f32(float *p, unsigned n) {
 *   unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
 *   if (i < n) p[i] += 1.0f;
 * }
 * ```
 *
 * @module
 */

/** The PTX module: `scale_add_f32(ptr x, ptr y, f32 a, f32 b, u32 n)` and `add_one_f32(ptr p, u32 n)`. */
export const KERNELS_PTX: string = `
.version 8.0
.target sm_80
.address_size 64

// y[i] = a * x[i] + b for i < n, one thread per element.
.visible .entry scale_add_f32(
  .param .u64 x,
  .param .u64 y,
  .param .f32 a,
  .param .f32 b,
  .param .u32 n
)
{
  .reg .pred %p<2>;
  .reg .f32 %f<5>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;

  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  ld.param.f32 %f1, [a];
  ld.param.f32 %f2, [b];
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.f32 %f3, [%rd5];
  fma.rn.f32 %f4, %f3, %f1, %f2;
  cvta.to.global.u64 %rd6, %rd2;
  add.s64 %rd7, %rd6, %rd4;
  st.global.f32 [%rd7], %f4;
DONE:
  ret;
}

// p[i] += 1 for i < n, one thread per element.
.visible .entry add_one_f32(
  .param .u64 p,
  .param .u32 n
)
{
  .reg .pred %p<2>;
  .reg .f32 %f<3>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<5>;

  ld.param.u64 %rd1, [p];
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
`;
