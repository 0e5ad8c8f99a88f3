/* dlpack.c — DLPack 1.x in and out: blocks exported as managed tensors that
 * hold a block reference, and other libraries' tensors described as leaves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "mtc.h"

/* What an exported tensor points at: the managed tensor itself, the block
 * reference it holds, and its shape and strides (ndim each). One malloc. */
typedef struct export_state {
  DLManagedTensorVersioned managed;
  mtc_block *block;
  int64_t dims[];
} export_state;

static void export_deleter(DLManagedTensorVersioned *self) {
  if (self == NULL) return;
  export_state *state = (export_state *)self->manager_ctx;
  mtc_block_release(state->block);
  free(state);
}

static const char *code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    case kDLFloat8_e3m4: case kDLFloat8_e4m3: case kDLFloat8_e4m3b11fnuz:
    case kDLFloat8_e4m3fn: case kDLFloat8_e4m3fnuz: case kDLFloat8_e5m2:
    case kDLFloat8_e5m2fnuz: case kDLFloat8_e8m0fnu:
      return "float8";
    case kDLFloat6_e2m3fn: case kDLFloat6_e3m2fn: return "float6";
    case kDLFloat4_e2m1fn: return "float4";
    default: return "unknown";
  }
}

/* Bytes of one element of dtype, or 0 when libmtc does not know the dtype:
 * scalars (lanes 1) of whole bytes that some library gives a meaning. */
static uint32_t element_bytes(DLDataType dtype) {
  if (dtype.lanes != 1) return 0;
  const uint8_t bits = dtype.bits;
  int known = 0;
  switch (dtype.code) {
    case kDLInt:
    case kDLUInt: known = bits == 8 || bits == 16 || bits == 32 || bits == 64; break;
    case kDLFloat: known = bits == 16 || bits == 32 || bits == 64; break;
    case kDLBfloat: known = bits == 16; break;
    case kDLComplex: known = bits == 32 || bits == 64 || bits == 128; break;
    case kDLBool: known = bits == 8; break;
    case kDLFloat8_e3m4: case kDLFloat8_e4m3: case kDLFloat8_e4m3b11fnuz:
    case kDLFloat8_e4m3fn: case kDLFloat8_e4m3fnuz: case kDLFloat8_e5m2:
    case kDLFloat8_e5m2fnuz: case kDLFloat8_e8m0fnu:
      known = bits == 8;
      break;
    default: break;
  }
  return known ? bits / 8u : 0;
}

static mtc_status dtype_error(mtc_status status, const char *who,
                              DLDataType dtype) {
  return mtc_error_set(
      status,
      "%s: dtype %s (code %u, bits %u, lanes %u) is not one libmtc copies: "
      "it takes scalars (lanes 1) of int/uint 8-64 bits, float 16/32/64, "
      "bfloat 16, complex 32/64/128, bool 8 and float8",
      who, code_name(dtype.code), dtype.code, dtype.bits, dtype.lanes);
}

/* "[4, 3]" into buf (cut with "..." when it does not fit). */
static const char *format_dims(char *buf, size_t capacity, const int64_t *dims,
                               int32_t ndim) {
  size_t used = 0;
  buf[used++] = '[';
  for (int32_t i = 0; i < ndim && used + 24 < capacity; i++) {
    used += (size_t)snprintf(buf + used, capacity - used, "%s%lld",
                             i ? ", " : "", (long long)dims[i]);
  }
  if (ndim > 0 && used + 24 >= capacity) {
    mtc_format(buf + used, capacity - used, "...]");
  } else {
    mtc_format(buf + used, capacity - used, "]");
  }
  return buf;
}

/* Element count of shape into *out; an error names the bad extent. */
static mtc_status count_elements(const char *who, const int64_t *shape,
                                 int32_t ndim, uint32_t element_size,
                                 uint64_t *out) {
  uint64_t count = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                           "%s: shape[%d] is %lld; extents must be >= 0", who,
                           (int)i, (long long)shape[i]);
    }
    if (__builtin_mul_overflow(count, (uint64_t)shape[i], &count)) {
      count = UINT64_MAX; /* only zero can bring it back */
    }
  }
  uint64_t bytes;
  if (count == UINT64_MAX || __builtin_mul_overflow(count, element_size, &bytes)) {
    char dims[160];
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: shape %s holds more bytes than memory can", who,
                         format_dims(dims, sizeof dims, shape, ndim));
  }
  *out = count;
  return MTC_OK;
}

MTC_API mtc_status mtc_block_to_dlpack(mtc_block *block, uint64_t offset,
                                       const int64_t *shape, int32_t ndim,
                                       const DLDataType *dtype, uint32_t flags,
                                       DLManagedTensorVersioned **out) {
  static const char who[] = "mtc_block_to_dlpack";
  if (out != NULL) *out = NULL;
  if (block == NULL || dtype == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: block, dtype and out must not be NULL", who);
  }
  if (ndim < 0 || ndim > MTC_DLPACK_MAX_NDIM) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: ndim is %d; it must be 0..%d", who, (int)ndim,
                         MTC_DLPACK_MAX_NDIM);
  }
  if (ndim > 0 && shape == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: shape is NULL but ndim is %d", who, (int)ndim);
  }
  if (flags & ~(uint32_t)MTC_DLPACK_PINNED_AS_CUDA_HOST) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: unknown flags 0x%x", who, flags);
  }
  const uint32_t element_size = element_bytes(*dtype);
  if (element_size == 0) return dtype_error(MTC_ERR_INVALID_ARGUMENT, who, *dtype);
  uint64_t count;
  mtc_status status = count_elements(who, shape, ndim, element_size, &count);
  if (status != MTC_OK) return status;
  const uint64_t bytes = count * element_size;

  mtc_block_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  status = mtc_block_get_info(block, &info);
  if (status != MTC_OK) return status;
  if (offset > info.bytes || bytes > info.bytes - offset) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: %llu bytes at offset %llu do not fit in the "
                         "block's %llu bytes",
                         who, (unsigned long long)bytes,
                         (unsigned long long)offset,
                         (unsigned long long)info.bytes);
  }
  if ((info.address + offset) % element_size != 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: offset %llu does not start a %u-byte element "
                         "(the address must be a multiple of it)",
                         who, (unsigned long long)offset, element_size);
  }

  export_state *state =
      malloc(sizeof *state + 2 * (size_t)ndim * sizeof(int64_t));
  if (state == NULL) {
    return mtc_error_set(MTC_ERR_OUT_OF_MEMORY, "%s: out of host memory", who);
  }
  int64_t *dims = state->dims;
  int64_t *strides = state->dims + ndim;
  int64_t stride = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    dims[i] = shape[i];
    strides[i] = stride;
    if (shape[i] > 0) stride *= shape[i];
  }

  DLManagedTensorVersioned *m = &state->managed;
  memset(m, 0, sizeof *m);
  m->version.major = MTC_DLPACK_MAJOR_VERSION;
  m->version.minor = MTC_DLPACK_MINOR_VERSION;
  m->manager_ctx = state;
  m->deleter = export_deleter;
  m->flags = 0;
  /* The element itself, not block start + byte_offset: PyTorch and others
   * read data and ignore byte_offset. */
  m->dl_tensor.data = (void *)(uintptr_t)(info.address + offset);
  if (info.device == MTC_DEVICE_CPU) {
    const int cuda_host = info.pinned && (flags & MTC_DLPACK_PINNED_AS_CUDA_HOST);
    m->dl_tensor.device.device_type = cuda_host ? kDLCUDAHost : kDLCPU;
    m->dl_tensor.device.device_id = 0;
  } else {
    m->dl_tensor.device.device_type = kDLCUDA;
    m->dl_tensor.device.device_id = info.device;
  }
  m->dl_tensor.ndim = ndim;
  m->dl_tensor.dtype = *dtype;
  m->dl_tensor.shape = ndim > 0 ? dims : NULL;
  m->dl_tensor.strides = ndim > 0 ? strides : NULL;
  m->dl_tensor.byte_offset = 0;

  mtc_block_retain(block);
  state->block = block;
  *out = m;
  return MTC_OK;
}

/* How a tensor's elements lie in memory, from its shape and strides. */
typedef struct layout {
  int dense;          /* row-major contiguous */
  int rows;           /* else: rows of row_elements, pitch_elements apart */
  uint64_t row_count;
  uint64_t row_elements;
  uint64_t pitch_elements;
} layout;

/* Walks the dimensions from the innermost: each of extent > 1 must have
 * the stride of a dense layout, except that one outer dimension (with only
 * extent-1 dimensions before it) may step farther: a set of rows. */
static layout find_layout(const DLTensor *x, uint64_t count) {
  layout l = {1, 0, 0, 0, 0};
  if (x->strides == NULL || count == 0) return l;
  uint64_t expected = 1;
  int32_t outer = -1;
  for (int32_t i = x->ndim - 1; i >= 0; i--) {
    if (x->shape[i] == 1) continue;
    if (outer >= 0) return (layout){0, 0, 0, 0, 0}; /* two strided dims */
    if (x->strides[i] >= 0 && (uint64_t)x->strides[i] == expected) {
      expected *= (uint64_t)x->shape[i];
    } else {
      outer = i;
    }
  }
  l.dense = outer < 0;
  if (outer >= 0 && x->strides[outer] > 0 &&
      (uint64_t)x->strides[outer] >= expected) {
    l.rows = 1;
    l.row_count = (uint64_t)x->shape[outer];
    l.row_elements = expected;
    l.pitch_elements = (uint64_t)x->strides[outer];
  }
  return l;
}

/* The row-major strides of x's shape, for error messages. */
static void dense_strides(const DLTensor *x, int64_t *out) {
  int64_t stride = 1;
  for (int32_t i = x->ndim - 1; i >= 0; i--) {
    out[i] = stride;
    if (x->shape[i] > 0) stride *= x->shape[i];
  }
}

static mtc_status layout_error(const char *who, const DLTensor *x,
                               int on_host) {
  char shape[160], strides[160], dense[160];
  int64_t want[MTC_DLPACK_MAX_NDIM];
  dense_strides(x, want);
  return mtc_error_set(
      MTC_ERR_UNSUPPORTED,
      "%s: strides %s of shape %s are not row-major contiguous (that would "
      "be %s)%s; make the tensor contiguous first",
      who, format_dims(strides, sizeof strides, x->strides, x->ndim),
      format_dims(shape, sizeof shape, x->shape, x->ndim),
      format_dims(dense, sizeof dense, want, x->ndim),
      on_host ? " nor rows of contiguous elements under one outer stride"
              : " (device tensors must be)");
}

MTC_API mtc_status mtc_leaf_from_dlpack(const DLManagedTensorVersioned *t,
                                        mtc_leaf *out) {
  static const char who[] = "mtc_leaf_from_dlpack";
  if (t == NULL || out == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: tensor and out must not be NULL", who);
  }
  if (t->version.major != MTC_DLPACK_MAJOR_VERSION) {
    return mtc_error_set(MTC_ERR_UNSUPPORTED,
                         "%s: the tensor is DLPack %u.%u; libmtc reads %d.x",
                         who, t->version.major, t->version.minor,
                         MTC_DLPACK_MAJOR_VERSION);
  }
  const DLTensor *x = &t->dl_tensor;
  if (x->ndim < 0 || x->ndim > MTC_DLPACK_MAX_NDIM) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: ndim is %d; libmtc reads 0..%d", who,
                         (int)x->ndim, MTC_DLPACK_MAX_NDIM);
  }
  if (x->ndim > 0 && x->shape == NULL) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: shape is NULL but ndim is %d", who, (int)x->ndim);
  }
  const uint32_t element_size = element_bytes(x->dtype);
  if (element_size == 0) return dtype_error(MTC_ERR_UNSUPPORTED, who, x->dtype);

  int32_t device;
  switch ((int)x->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      device = MTC_DEVICE_CPU;
      break;
    case kDLCUDA:
      if (x->device.device_id < 0) {
        return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                             "%s: kDLCUDA device_id is %d", who,
                             (int)x->device.device_id);
      }
      device = x->device.device_id;
      break;
    default:
      return mtc_error_set(
          MTC_ERR_UNSUPPORTED,
          "%s: device type %d is not one libmtc copies (kDLCPU = 1, "
          "kDLCUDA = 2, kDLCUDAHost = 3)",
          who, (int)x->device.device_type);
  }

  uint64_t count;
  mtc_status status = count_elements(who, x->shape, x->ndim, element_size, &count);
  if (status != MTC_OK) return status;
  const uint64_t bytes = count * element_size;
  if (x->data == NULL && bytes > 0) {
    return mtc_error_set(MTC_ERR_INVALID_ARGUMENT,
                         "%s: data is NULL but the tensor holds %llu bytes",
                         who, (unsigned long long)bytes);
  }

  const layout l = find_layout(x, count);
  memset(out, 0, sizeof *out);
  if (!l.dense) {
    const int on_host = device == MTC_DEVICE_CPU;
    if (!on_host || !l.rows) return layout_error(who, x, on_host);
    uint64_t pitch;
    if (l.row_count > UINT32_MAX ||
        __builtin_mul_overflow(l.pitch_elements, element_size, &pitch)) {
      return mtc_error_set(MTC_ERR_UNSUPPORTED,
                           "%s: %llu rows %llu elements apart; a row leaf "
                           "has at most %u rows",
                           who, (unsigned long long)l.row_count,
                           (unsigned long long)l.pitch_elements, UINT32_MAX);
    }
    out->row_count = (uint32_t)l.row_count;
    out->row_pitch = pitch;
  }
  out->address = bytes ? (uint64_t)(uintptr_t)x->data + x->byte_offset : 0;
  out->bytes = bytes;
  out->device = device;
  out->element_size = element_size;
  out->flags = 0;
  return MTC_OK;
}

MTC_API void mtc_dlpack_delete(DLManagedTensorVersioned *t) {
  if (t != NULL && t->deleter != NULL) t->deleter(t);
}
