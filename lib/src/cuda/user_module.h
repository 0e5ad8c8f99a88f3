/* user_module.h — mtc_module: a module of the caller's kernels, loaded into
 * one device's primary context (user_module.c); launch.c launches its
 * functions. */
#ifndef MTC_CUDA_USER_MODULE_H
#define MTC_CUDA_USER_MODULE_H

#include "cuda/device.h"

struct mtc_module {
  mtc_device *device;
  CUmodule module;
};

#endif
