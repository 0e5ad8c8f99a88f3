// mtc_kernels.cu: the one translation unit nvcc compiles into the fatbin that
// libmtc embeds (build.zig): every kernel of cuda/, each declared extern "C"
// so that cuModuleGetFunction finds it by its plain name.
#include "copy_segments.cu"
#include "debug_kernels.cu"
