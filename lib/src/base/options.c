/* options.c — option defaults and range checks. */
#include "base/options.h"

#include <string.h>

#include "base/error.h"

_Static_assert(sizeof(mtc_options) == MTC_OPTIONS_V1_SIZE,
               "mtc_options only grows; update MTC_OPTIONS_V1_SIZE's users");

MTC_API void mtc_options_init(mtc_options *options) {
  if (options == NULL) return;
  const mtc_options defaults = MTC_OPTIONS_INIT;
  *options = defaults;
}

mtc_status mtc_options_normalize(const mtc_options *in, mtc_options *out) {
  mtc_options_init(out);
  if (in == NULL) return MTC_OK;
  if (in->struct_size < MTC_OPTIONS_V1_SIZE) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "options.struct_size is %u; it must be at least %u "
                         "(set it with MTC_OPTIONS_INIT or mtc_options_init)",
                         in->struct_size, MTC_OPTIONS_V1_SIZE);
  }
  /* A newer caller's larger struct: the fields this build knows are a
   * prefix of it. */
  size_t known = in->struct_size < sizeof *out ? in->struct_size : sizeof *out;
  memcpy(out, in, known);
  out->struct_size = (uint32_t)sizeof *out;

  uint64_t alignment = out->min_packed_alignment_bytes;
  if (alignment < 1 || alignment > 4096) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "options.min_packed_alignment_bytes is %llu; it must "
                         "be from 1 to 4096",
                         (unsigned long long)alignment);
  }
  if (out->max_packed_chunk_bytes < 1 ||
      out->max_packed_chunk_bytes > ((uint64_t)1 << 40)) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "options.max_packed_chunk_bytes is %llu; it must be "
                         "from 1 to 2^40 (1 TiB)",
                         (unsigned long long)out->max_packed_chunk_bytes);
  }
  if (out->staging_piece_bytes < 4096) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "options.staging_piece_bytes is %llu; it must be at "
                         "least 4096",
                         (unsigned long long)out->staging_piece_bytes);
  }
  return MTC_OK;
}
