// header_cpp.cpp — mtc.h compiles as C++17 on its own (extern "C", no C-only
// constructs), and MTC_OPTIONS_INIT works as a C++ initializer.
#include "mtc.h"

#include <cstdio>
#include <cstring>

static_assert(sizeof(mtc_leaf) == 40, "mtc_leaf is 40 bytes");
static_assert(sizeof(mtc_leaf_result) == 32, "mtc_leaf_result is 32 bytes");
static_assert(sizeof(mtc_options) == 56, "mtc_options is 56 bytes");
static_assert(sizeof(mtc_stats) == 128, "mtc_stats is 128 bytes");

int main() {
  mtc_options from_macro = MTC_OPTIONS_INIT;
  mtc_options from_call;
  std::memset(&from_call, 0, sizeof from_call);
  mtc_options_init(&from_call);
  mtc_plan *plan = nullptr;
  bool ok = std::memcmp(&from_macro, &from_call, sizeof from_call) == 0 &&
            mtc_plan_create(MTC_DEVICE_CPU, &from_macro, &plan) == MTC_OK;
  mtc_plan_release(plan);
  std::printf("header_cpp: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
