/* library.c — the library-wide calls of mtc.h that need no other layer:
 * version, status names, the thread's last error; and the sizes of the
 * structs that bindings hard-code. */
#include "base/error.h"
#include "mtc.h"

#define MTC_STRINGIFY_(x) #x
#define MTC_STRINGIFY(x) MTC_STRINGIFY_(x)

/* The layouts that bindings hard-code. */
_Static_assert(sizeof(mtc_leaf) == 40, "mtc_leaf is 40 bytes");
_Static_assert(sizeof(mtc_leaf_layout) == 136, "mtc_leaf_layout is 136 bytes");
_Static_assert(sizeof(mtc_leaf_result) == 32, "mtc_leaf_result is 32 bytes");
_Static_assert(sizeof(mtc_options) == 56, "mtc_options is 56 bytes");
_Static_assert(sizeof(mtc_stats) == 128, "mtc_stats is 128 bytes");
_Static_assert(sizeof(mtc_block_info) == 32, "mtc_block_info is 32 bytes");
_Static_assert(sizeof(mtc_plan_stats) == 112, "mtc_plan_stats is 112 bytes");

MTC_API uint32_t mtc_version_number(void) { return MTC_VERSION_NUMBER; }

MTC_API const char *mtc_version_string(void) {
  return MTC_STRINGIFY(MTC_VERSION_MAJOR) "." MTC_STRINGIFY(
      MTC_VERSION_MINOR) "." MTC_STRINGIFY(MTC_VERSION_PATCH);
}

MTC_API const char *mtc_status_name(int32_t status) {
  switch (status) {
    case MTC_OK: return "MTC_OK";
    case MTC_IN_PROGRESS: return "MTC_IN_PROGRESS";
    case MTC_ERR_INVALID_ARGUMENT: return "MTC_ERR_INVALID_ARGUMENT";
    case MTC_ERR_INVALID_STATE: return "MTC_ERR_INVALID_STATE";
    case MTC_ERR_NO_DRIVER: return "MTC_ERR_NO_DRIVER";
    case MTC_ERR_NO_DEVICE: return "MTC_ERR_NO_DEVICE";
    case MTC_ERR_OUT_OF_MEMORY: return "MTC_ERR_OUT_OF_MEMORY";
    case MTC_ERR_CUDA: return "MTC_ERR_CUDA";
    case MTC_ERR_UNSUPPORTED: return "MTC_ERR_UNSUPPORTED";
    case MTC_ERR_INTERNAL: return "MTC_ERR_INTERNAL";
    default: return "MTC_UNKNOWN_STATUS";
  }
}

MTC_API const char *mtc_last_error(void) { return mtc_error_text(); }
