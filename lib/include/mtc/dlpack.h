/* mtc/dlpack.h — DLPack 1.x: its declarations, export of a block, import as
 * a leaf.
 * Part of mtc.h, which includes every topic in order: include mtc.h. */
#ifndef MTC_PUBLIC_DLPACK_H
#define MTC_PUBLIC_DLPACK_H

#ifndef MTC_H
#error "include mtc.h, not mtc/dlpack.h"
#endif

/* ----------------------------------------------------------------- DLPack */

/* DLPack 1.x (https://github.com/dmlc/dlpack) is the exchange format that
 * PyTorch, CuPy, JAX, NumPy and others read and write. The declarations
 * below have the layout of dlpack.h 1.1. A program that includes the
 * official dlpack.h BEFORE mtc.h gets that header's declarations and these
 * step aside (its include guard DLPACK_DLPACK_H_ is checked); including it
 * after mtc.h redefines them, which the compiler rejects. */
#if !defined(DLPACK_DLPACK_H_) && !defined(DLPACK_MAJOR_VERSION)

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Device types; libmtc reads kDLCPU, kDLCUDA and kDLCUDAHost. */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, /* page-locked host memory */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id; /* the CUDA ordinal for kDLCUDA */
} DLDevice;

typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* DLDataTypeCode */
  uint8_t bits;   /* bits of one lane */
  uint16_t lanes; /* 1 for scalars */
} DLDataType;

typedef struct {
  void *data;           /* host pointer or CUdeviceptr */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;       /* ndim extents */
  int64_t *strides;     /* ndim strides in elements, or NULL: row-major */
  uint64_t byte_offset; /* the first element is at data + byte_offset */
} DLTensor;

/* DLManagedTensorVersioned.flags bits */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

struct DLManagedTensorVersioned {
  DLPackVersion version;
  /* The producer's state (libmtc: its allocation holding the block). */
  void *manager_ctx;
  /* Called once by whoever owns the tensor when done with it; may be NULL. */
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
};

#endif /* DLPack declarations */

/* dlpack.h leaves the struct without a typedef in C; C11 and C++ accept
 * this one even where another header has the same. */
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;

/* The DLPack version libmtc writes into the tensors it exports; it reads
 * tensors of major version 1. */
#define MTC_DLPACK_MAJOR_VERSION 1
#define MTC_DLPACK_MINOR_VERSION 1

/* Most dimensions libmtc exports or reads. */
#define MTC_DLPACK_MAX_NDIM 32

/* mtc_block_to_dlpack flags */
enum {
  /* Describe a pinned host block as kDLCUDAHost. Without it host blocks are
   * kDLCPU, which every consumer reads (PyTorch rejects kDLCUDAHost). */
  MTC_DLPACK_PINNED_AS_CUDA_HOST = 1u
};

/* Exports a dense, row-major tensor that starts `offset` bytes into block
 * (an mtc_leaf_result's block and offset) as a new DLPack tensor, written
 * to *out: data is the tensor's first element (byte_offset 0), strides are
 * filled in (never NULL), the device is kDLCUDA and the block's ordinal for
 * device blocks, kDLCPU for host blocks (see the flag above).
 *
 * Ownership: the tensor holds one reference to block, taken here, so the
 * memory outlives the plan and any other reference. Whoever owns the tensor
 * (the caller, or the consumer it was handed to) calls its deleter exactly
 * once; the deleter drops that reference and frees the tensor. It may run
 * on any thread. The same lifetime rule as mtc_block_release applies: work
 * that reads the tensor must be finished or ordered before libmtc's next
 * copy when the deleter runs.
 *
 * shape: ndim extents >= 0 (NULL when ndim is 0); ndim 0..MTC_DLPACK_MAX_NDIM.
 * dtype: lanes 1, and a code and bits libmtc knows (ints and uints of
 * 8-64 bits, float 16/32/64, bfloat 16, complex 32/64/128, bool 8, the
 * 8-bit float8 codes). The tensor must lie inside the block and start at a
 * multiple of its element size. MTC_ERR_INVALID_ARGUMENT otherwise, and
 * *out is NULL. */
MTC_API mtc_status mtc_block_to_dlpack(mtc_block *block, uint64_t offset,
                                       const int64_t *shape, int32_t ndim,
                                       const DLDataType *dtype, uint32_t flags,
                                       struct DLManagedTensorVersioned **out);

/* Describes the memory of a DLPack tensor made by another library as a leaf
 * for mtc_plan_add_leaf / mtc_plan_add_leaves, written to *out: kDLCPU and
 * kDLCUDAHost become host leaves (MTC_DEVICE_CPU), kDLCUDA a leaf on CUDA
 * device device_id. The tensor must be row-major contiguous (strides NULL
 * or matching its shape); a host tensor whose rows are contiguous but
 * farther apart (a slice such as x[:, :3]) becomes a row leaf (row_count,
 * row_pitch). Other layouts are MTC_ERR_UNSUPPORTED, as are other device
 * types, major versions other than 1, and dtypes mtc_block_to_dlpack
 * rejects; the message says which.
 *
 * Ownership: the caller keeps t. libmtc never calls its deleter and keeps
 * no pointer to it; the memory t describes must stay valid until the copy
 * that reads the leaf has finished (mtc_plan_poll or mtc_plan_wait returned
 * MTC_OK, or mtc_plan_release returned). Then call the deleter (or
 * mtc_dlpack_delete). */
MTC_API mtc_status mtc_leaf_from_dlpack(
    const struct DLManagedTensorVersioned *t, mtc_leaf *out);

/* Calls t->deleter(t) when t and its deleter are not NULL: for bindings
 * that cannot call a C function pointer themselves. Once per tensor. */
MTC_API void mtc_dlpack_delete(struct DLManagedTensorVersioned *t);

#endif /* MTC_PUBLIC_DLPACK_H */
