/*
 * mtc.h — the whole public C ABI of multi-tensor-copier (libmtc).
 *
 * libmtc moves nested batches of many small tensors between host memory and
 * CUDA GPUs. Callers describe each tensor ("leaf") by address and size; the
 * library packs small host leaves into a few staging chunks, copies each chunk
 * with one asynchronous DMA, and hands back where every leaf landed.
 *
 * Life cycle of one copy (a "plan"):
 *
 *     mtc_options opts = MTC_OPTIONS_INIT;
 *     mtc_plan *plan;
 *     if (mtc_plan_create(0, &opts, &plan) != MTC_OK) puts(mtc_last_error());
 *     mtc_plan_add_leaves(plan, leaves, n);        // or mtc_plan_add_leaf, once per leaf
 *     mtc_plan_submit(plan);                       // returns at once
 *     while (mtc_plan_poll(plan) == MTC_IN_PROGRESS) do_other_work();
 *     mtc_plan_results(plan, 0, n, results);       // where each leaf landed
 *     for (...) mtc_block_retain(results[i].block); // keep outputs past the plan
 *     mtc_plan_release(plan);
 *
 * Conventions
 *  - Every fallible call returns an mtc_status. On failure the message is
 *    readable with mtc_plan_last_error() for calls on a plan, and with
 *    mtc_last_error() (per thread) for every call.
 *  - Release functions accept NULL.
 *  - The CUDA driver (libcuda.so.1) is loaded on first use, never linked.
 *    Without it, host-only copies still work and asking for a CUDA device
 *    returns MTC_ERR_NO_DRIVER with a message saying why.
 *  - Threads: different plans may be used from different threads at once.
 *    One plan must not be used from two threads at the same time.
 *    Blocks may be retained and released from any thread.
 *  - Structs passed in are size-prefixed (first field struct_size) and only
 *    grow at the end, so older callers keep working.
 *  - A call that a plan rejects for misuse (MTC_ERR_INVALID_STATE, such as a
 *    second submit, or MTC_ERR_INVALID_ARGUMENT) returns its status with its
 *    message in mtc_last_error(). A plan that has failed keeps the error
 *    that ended it: poll and wait go on reporting that status, and
 *    mtc_plan_last_error() its message.
 *  - Misuse the library cannot detect is undefined behavior, as with free():
 *    each function says which. In short: a handle (plan, block, event) used
 *    after its last release, released more often than it was retained or
 *    created, or used from two threads at once where that is not allowed;
 *    out-parameters and arrays smaller than the call says; leaf memory that
 *    is freed, unmapped or changed while the copy reads it. Such a program
 *    may read freed memory, crash, or abort (glibc's "double free
 *    detected").
 */
#ifndef MTC_H
#define MTC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MTC_API __attribute__((visibility("default")))
#else
#define MTC_API
#endif

/* ---------------------------------------------------------------- version */

#define MTC_VERSION_MAJOR 0
#define MTC_VERSION_MINOR 1
#define MTC_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH. */
#define MTC_VERSION_NUMBER \
  (MTC_VERSION_MAJOR * 10000 + MTC_VERSION_MINOR * 100 + MTC_VERSION_PATCH)

/* Returns MTC_VERSION_NUMBER of the loaded library, so bindings can check
 * that they loaded the library they were written for. Any thread. */
MTC_API uint32_t mtc_version_number(void);

/* Returns the version as a static string such as "0.1.0". Any thread. */
MTC_API const char *mtc_version_string(void);

/* ----------------------------------------------------------------- status */

typedef enum mtc_status {
  MTC_OK = 0,
  /* mtc_plan_poll: the copy has not finished yet. Not an error. */
  MTC_IN_PROGRESS = 1,
  /* A bad argument: NULL where a value is needed, a size or alignment out of
   * range, a leaf that does not describe memory. */
  MTC_ERR_INVALID_ARGUMENT = 2,
  /* The call does not fit the plan's state (adding leaves after submit,
   * reading results before the copy finished, submitting twice). */
  MTC_ERR_INVALID_STATE = 3,
  /* The CUDA driver could not be loaded or initialised. */
  MTC_ERR_NO_DRIVER = 4,
  /* The CUDA device ordinal does not exist on this machine. */
  MTC_ERR_NO_DEVICE = 5,
  /* A host, pinned or device allocation failed. */
  MTC_ERR_OUT_OF_MEMORY = 6,
  /* Any other error reported by the CUDA driver; the message names it. */
  MTC_ERR_CUDA = 7,
  /* A valid request this build cannot serve. */
  MTC_ERR_UNSUPPORTED = 8,
  /* A bug in libmtc. */
  MTC_ERR_INTERNAL = 9
} mtc_status;

/* Returns a static name for a status ("MTC_OK", ...); "MTC_UNKNOWN_STATUS"
 * for values outside the enum. Any thread. */
MTC_API const char *mtc_status_name(int32_t status);

/* Returns the message of the last failed call made on this thread, or "" if
 * none failed yet. The string stays valid until the next libmtc call on the
 * same thread. */
MTC_API const char *mtc_last_error(void);

/* ---------------------------------------------------------------- devices */

/* The device value that means host memory. CUDA devices are 0, 1, ... */
#define MTC_DEVICE_CPU (-1)

/* Writes the number of CUDA devices to *out_count. Without a driver it
 * writes 0 and returns MTC_ERR_NO_DRIVER (the message says why). */
MTC_API mtc_status mtc_cuda_device_count(int32_t *out_count);

/* Writes the calling thread's current CUDA device (that of its current
 * context) to *out_device, or 0 when the thread has no current context. */
MTC_API mtc_status mtc_cuda_current_device(int32_t *out_device);

/* ---------------------------------------------------------------- options */

typedef struct mtc_options {
  /* sizeof(mtc_options) as the caller knows it; at least 56, the size in
   * version 0.1. Later versions accept 56 too and give fields added after
   * it their defaults. */
  uint32_t struct_size;
  /* Nonzero: host leaves are staged through the pinned-memory pool so that
   * every host-to-device DMA reads pinned memory. Zero: the driver copies
   * from pageable memory directly (slower, blocks the submitting thread). */
  uint32_t use_pinned_staging;
  /* Nonzero: contiguous host leaves up to pack_threshold_bytes are packed
   * together into chunks, one DMA per chunk. */
  uint32_t pack_cpu_tensors;
  /* Nonzero: mtc_plan_submit hands staging and submission to the library's
   * background thread and returns at once. Zero: submit does that work on
   * the calling thread before it returns. */
  uint32_t use_background_thread;
  /* Each packed leaf starts at a multiple of
   * round_up(max(min_packed_alignment_bytes, element_size), element_size)
   * (6 gives 6 for 2-byte elements, 8 for 4-byte ones). 1..4096. */
  uint64_t min_packed_alignment_bytes;
  /* Most bytes in one packed chunk; a leaf larger than this gets a block of
   * its own. 1 byte .. 1 TiB. */
  uint64_t max_packed_chunk_bytes;
  /* Host leaves of at most this many bytes are packed. */
  uint64_t pack_threshold_bytes;
  /* Most staging threads this plan uses from the shared pool; 0 = all. */
  uint32_t staging_threads;
  uint32_t reserved0;
  /* Unpacked host leaves are staged through pinned memory in pieces of this
   * many bytes, staging piece k+1 while piece k is in flight. >= 4096. */
  uint64_t staging_piece_bytes;
} mtc_options;

/* The defaults, the same as accvlab's multi_tensor_copier where it has them. */
#define MTC_OPTIONS_INIT                                                   \
  {                                                                        \
    (uint32_t)sizeof(mtc_options), 1u, 1u, 1u, 16u, (uint64_t)32 << 20,    \
        (uint64_t)256 << 10, 0u, 0u, (uint64_t)8 << 20                     \
  }

/* Fills *options with MTC_OPTIONS_INIT, for callers that cannot use the
 * macro (FFI). */
MTC_API void mtc_options_init(mtc_options *options);

/* ------------------------------------------------------------------ leaves */

/* mtc_leaf.flags */
enum {
  /* Never pack this leaf: copy it into a block of its own. */
  MTC_LEAF_NO_PACK = 1u,
  /* The leaf may lie in pinned host memory of the library's (a block of
   * mtc_host_block_alloc, or a pinned host output of a copy): the plan
   * looks it up at submit and, when found, DMAs it in place instead of
   * staging it (see "pinned host memory" below). A leaf not found is staged
   * as usual. Only a hint: a lookup costs a little, so leave it off for
   * leaves known to be pageable. */
  MTC_LEAF_PINNED = 2u
};

/* One tensor to copy: a run of bytes (or rows of bytes) in host memory or
 * in one CUDA device's memory. The copy is always dense. 40 bytes. Host
 * leaves of any other layout: add the leaf, then mtc_plan_set_leaf_layout. */
typedef struct mtc_leaf {
  /* Host pointer, or CUdeviceptr, of the first byte. May be 0 when bytes is 0. */
  uint64_t address;
  /* Size of the leaf in bytes (the size of its dense copy). */
  uint64_t bytes;
  /* Non-contiguous host leaves: distance in bytes from the start of one row
   * to the next in the source. Ignored unless row_count > 1. */
  uint64_t row_pitch;
  /* MTC_DEVICE_CPU, or the CUDA device that holds address. */
  int32_t device;
  /* Bytes per element: 1, 2, 4, 8 or 16. The copy starts at a multiple. */
  uint32_t element_size;
  /* 0 or 1: contiguous. More: the leaf is row_count rows of
   * bytes / row_count bytes each, row_pitch apart in the source (host only). */
  uint32_t row_count;
  /* MTC_LEAF_* bits. */
  uint32_t flags;
} mtc_leaf;

/* ---------------------------------------------------------------- blocks */

/* A refcounted allocation that holds copied leaves: device memory, or host
 * memory for copies to the host. Several leaves (a packed chunk) can view
 * one block; the memory is freed when the last reference is released. */
typedef struct mtc_block mtc_block;

typedef struct mtc_block_info {
  uint32_t struct_size;
  /* MTC_DEVICE_CPU for host memory, else the CUDA device. */
  int32_t device;
  /* First byte of the block. */
  uint64_t address;
  /* Usable bytes. */
  uint64_t bytes;
  /* Nonzero when the host memory is page-locked (pinned). */
  uint32_t pinned;
  uint32_t reserved0;
} mtc_block_info;

/* Adds a reference to block. NULL is ignored. Any thread. Undefined: a
 * block whose last reference is gone. */
MTC_API void mtc_block_retain(mtc_block *block);

/* Drops a reference; the last one frees the memory (device memory in stream
 * order on the library's copy stream for that device). NULL is ignored. Any
 * thread. Work that reads the block must be finished, or ordered before
 * the library's next copy, when the last reference goes. Undefined: more
 * releases than references (the plan's own reference is the plan's to
 * drop), and any use of the block or its memory after the last one. */
MTC_API void mtc_block_release(mtc_block *block);

/* Drops a reference to the block passed as `block`; `bytes` is ignored.
 * Shaped as an external-memory deallocator, void (*)(void *bytes, void
 * *context), for runtimes that free external buffers through a C callback
 * (Bun's toArrayBuffer). Any thread. */
MTC_API void mtc_block_release_callback(void *bytes, void *block);

/* Writes what block is to *out (out->struct_size must be set). */
MTC_API mtc_status mtc_block_get_info(const mtc_block *block,
                                      mtc_block_info *out);

/* ------------------------------------------------------------------ plans */

/* One copy of many leaves to one target device. */
typedef struct mtc_plan mtc_plan;

/* mtc_leaf_result.flags */
enum {
  /* The leaf was already where it had to be: address is the input address
   * and block is NULL. Nothing was copied. */
  MTC_RESULT_REUSED = 1u,
  /* The leaf was packed into a chunk shared with other leaves. */
  MTC_RESULT_PACKED = 2u,
  /* The leaf was read (or written) in place in pinned host memory of the
   * library's, with no staging copy; with PACKED, its block holds the
   * neighbours it lay next to, at the same distances as on the host. */
  MTC_RESULT_DIRECT = 4u
};

/* Where one leaf landed. 32 bytes. */
typedef struct mtc_leaf_result {
  /* The leaf's copy (or the input itself when reused); 0 for 0-byte leaves. */
  uint64_t address;
  /* The block that owns address, or NULL (reused and 0-byte leaves). The
   * plan holds one reference to each block until it is released. */
  mtc_block *block;
  /* address - start of block. */
  uint64_t offset;
  /* MTC_DEVICE_CPU or the CUDA device that holds address. */
  int32_t device;
  /* MTC_RESULT_* bits. */
  uint32_t flags;
} mtc_leaf_result;

/* Creates an empty plan that copies to target_device (MTC_DEVICE_CPU or a
 * CUDA ordinal). options may be NULL for the defaults. Returns
 * MTC_ERR_INVALID_ARGUMENT for options out of range, MTC_ERR_NO_DRIVER or
 * MTC_ERR_NO_DEVICE for a CUDA target that cannot be served; then
 * *out_plan is NULL and mtc_last_error() says why. Every plan created must
 * be released once (mtc_plan_release). */
MTC_API mtc_status mtc_plan_create(int32_t target_device,
                                   const mtc_options *options,
                                   mtc_plan **out_plan);

/* Appends one leaf; its index (0, 1, ...) is written to *out_index when
 * out_index is not NULL. Only before submit (MTC_ERR_INVALID_STATE after).
 * The memory the leaf describes must stay valid and unchanged until the
 * copy has finished. Undefined: a released plan; memory that goes away (is
 * freed, unmapped or shrunk) while the copy may read it, which can crash
 * the process (mtc_plan_stop_reading exists for runtimes that free memory
 * on their way out). Memory that only changes gives old bytes, new bytes or
 * a mix. */
MTC_API mtc_status mtc_plan_add_leaf(mtc_plan *plan, const mtc_leaf *leaf,
                                     uint64_t *out_index);

/* Appends count leaves read from an array of mtc_leaf, in order. On error no
 * leaf of the call is added and mtc_plan_error_leaf() names the bad one.
 * The same rules as mtc_plan_add_leaf; undefined also: `leaves` holding
 * fewer than count entries. */
MTC_API mtc_status mtc_plan_add_leaves(mtc_plan *plan, const mtc_leaf *leaves,
                                       uint64_t count);

/* Sets leaves[first + k].address to view_k for each k < count (count <= 8),
 * leaving leaves whose view_k is NULL or whose bytes are 0 as they are. For
 * FFI layers that pass a typed array argument as its data pointer cheaply
 * but read that pointer back slowly (Deno): one call fills eight leaf
 * descriptors. Touches nothing else; needs no plan. Undefined: `leaves`
 * holding fewer than first + count entries. */
MTC_API mtc_status mtc_leaves_set_addresses(mtc_leaf *leaves, uint64_t first,
                                            uint32_t count, const void *view0,
                                            const void *view1, const void *view2,
                                            const void *view3, const void *view4,
                                            const void *view5, const void *view6,
                                            const void *view7);

/* Number of leaves added so far. 0 for NULL. */
MTC_API uint64_t mtc_plan_leaf_count(const mtc_plan *plan);

/* Starts the copy: lays the leaves out, then stages and submits them (on the
 * background thread when the plan's options say so). Returns at once in that
 * case; errors found later are reported by poll and wait. Once only. An
 * error ends the plan: poll and wait return it, and the plan can only be
 * released. A leaf on a CUDA device this machine lacks is reported here
 * (MTC_ERR_NO_DEVICE / MTC_ERR_NO_DRIVER, naming the leaf). A second submit
 * is MTC_ERR_INVALID_STATE and changes nothing (a failed plan keeps its
 * error). Undefined: a released plan. */
MTC_API mtc_status mtc_plan_submit(mtc_plan *plan);

/* From now on the plan reads none of its leaves' host memory; waits up to
 * timeout_ms for a read in progress to end. A copy already staged goes on
 * (the GPU reads the library's own pinned memory); one that still had host
 * leaves to stage fails with MTC_ERR_INVALID_STATE, naming the leaf. For
 * exit hooks of runtimes that free the memory of leaves while copies are in
 * flight (Deno at the end of a script or a worker). MTC_OK, or
 * MTC_IN_PROGRESS if a read was still running at the timeout (then do not
 * free that memory yet). Any thread. Undefined: a released plan, or a call
 * that may overlap mtc_plan_release of the same plan. libmtc itself does
 * this for every live plan when the process calls exit() or quick_exit()
 * (it registers that handler when the first plan is created). */
MTC_API mtc_status mtc_plan_stop_reading(mtc_plan *plan, uint32_t timeout_ms);

/* Returns MTC_OK when the copy has finished, MTC_IN_PROGRESS while it runs,
 * or the error that stopped it. Never blocks (except to write host
 * destinations, below). A copy into host destinations
 * (mtc_plan_add_leaves_into to MTC_DEVICE_CPU) writes them here, on the
 * calling thread, in the first poll or wait that finds its device work
 * over; it has finished only then. Undefined: a released plan (the call
 * reads freed memory), and a call that may overlap mtc_plan_release of the
 * same plan. */
MTC_API mtc_status mtc_plan_poll(mtc_plan *plan);

/* Blocks until the copy has finished (or failed) and returns as poll would,
 * writing host destinations as poll does. Waits for this copy only, not for
 * other work on the GPU. Safe to call from another thread than the one
 * polling the plan as long as the plan is not released meanwhile; a
 * binding whose wait runs on another thread than the one that owns the
 * host destinations (an FFI "nonblocking" call) uses mtc_plan_wait_device.
 * Undefined: a released plan, and release while this call runs. */
MTC_API mtc_status mtc_plan_wait(mtc_plan *plan);

/* As mtc_plan_wait, but never writes host destinations: MTC_OK once the
 * copy's device work is over. A copy into host destinations has then still
 * to be finished by mtc_plan_poll or mtc_plan_wait on the thread that owns
 * them (mtc_plan_release drops that write instead). For FFI "nonblocking"
 * calls, which run on a thread of the runtime's. */
MTC_API mtc_status mtc_plan_wait_device(mtc_plan *plan);

/* As mtc_plan_poll, but never writes host destinations: MTC_OK once the
 * copy's device work is over (for a binding's garbage-collection backstop,
 * which must not write them at that moment, then releases the plan). */
MTC_API mtc_status mtc_plan_poll_device(mtc_plan *plan);

/* For a plan of copies into host memory: its poll or wait will not write
 * leaf `leaf`'s destination, because a copy submitted later writes it (a
 * binding keeps submission order this way when copies are awaited in
 * another order). Nothing if the destinations were written already.
 * MTC_ERR_INVALID_ARGUMENT for a leaf outside the plan or a plan that is
 * not one of copies into host memory. Threads: as mtc_plan_poll. */
MTC_API mtc_status mtc_plan_skip_copy_out(mtc_plan *plan, uint64_t leaf);

/* Writes results of leaves [first, first + count) to out. Only after poll or
 * wait returned MTC_OK (MTC_ERR_INVALID_STATE before, and for a failed
 * plan; MTC_ERR_INVALID_ARGUMENT for a range outside the plan). The blocks
 * written are the plan's: retain those you keep past mtc_plan_release.
 * Undefined: `out` holding fewer than count entries; a released plan. */
MTC_API mtc_status mtc_plan_results(mtc_plan *plan, uint64_t first,
                                    uint64_t count, mtc_leaf_result *out);

/* The message of the plan's last error, or "" if none. Valid until the plan
 * is released. "" for NULL. Undefined: a released plan. */
MTC_API const char *mtc_plan_last_error(const mtc_plan *plan);

/* Index in the plan (0, 1, ... over all adds) of the leaf that the plan's
 * last error is about, or -1. A copy that fails to allocate or enqueue
 * names the leaf it was copying; for leaves packed into one chunk, the
 * chunk's first leaf, and the message says how many more it packs. */
MTC_API int64_t mtc_plan_error_leaf(const mtc_plan *plan);

/* Releases the plan: waits for a copy in flight, returns staging memory to
 * its pool and drops the plan's block references (blocks retained by the
 * caller live on). NULL is ignored. Undefined: releasing a plan twice
 * (glibc may abort with "double free detected", or worse), any call on it
 * afterwards, and releasing it while another thread is in a call on it
 * (mtc_plan_wait, mtc_plan_stop_reading, ...). */
MTC_API void mtc_plan_release(mtc_plan *plan);

/* ---------------------------------------------------------- leaf layouts */

/* Most dimensions of an mtc_leaf_layout. */
#define MTC_LAYOUT_MAX_RANK 8

/* Where the elements of a strided host leaf are: element (i0, ..., iN-1)
 * is the element_size bytes at leaf.address + sum(ik * byte_strides[k]).
 * Any such layout: transposed, sliced with steps, broadcast (stride 0),
 * overlapping. The copy is the leaf's elements in row-major order, dense,
 * as for any other leaf, and a strided leaf is packed, staged and split
 * over the staging threads as a contiguous leaf of the same bytes is.
 * 136 bytes. */
typedef struct mtc_leaf_layout {
  /* sizeof(mtc_leaf_layout) as the caller knows it: 136 in version 0.1. */
  uint32_t struct_size;
  /* Dimensions used: 1..MTC_LAYOUT_MAX_RANK. */
  uint32_t rank;
  /* Extent of each dimension, outermost first. Their product times the
   * leaf's element_size is the leaf's bytes. */
  uint64_t shape[MTC_LAYOUT_MAX_RANK];
  /* Bytes from one element to the next along each dimension. */
  uint64_t byte_strides[MTC_LAYOUT_MAX_RANK];
} mtc_leaf_layout;

/* Gives leaf `index` of the plan (a host leaf, row_count 0 or 1) the
 * layout *layout; NULL gives it back its contiguous layout. Only before
 * submit (MTC_ERR_INVALID_STATE after). A second call replaces the first.
 * MTC_ERR_INVALID_ARGUMENT, naming the leaf, for an index out of range, a
 * rank out of range, a shape whose elements are not the leaf's bytes, and
 * a layout that reaches past the end of the address space;
 * MTC_ERR_UNSUPPORTED for a leaf on a CUDA device or with rows. A layout
 * that turns out contiguous (its strides are those of its shape) makes the
 * leaf contiguous.
 *
 * Ownership: the plan copies *layout; it need not outlive the call. Every
 * byte the layout reaches is read by the copy and must stay valid and
 * unchanged until the copy has finished, as for mtc_plan_add_leaf (the
 * library cannot check that the layout stays inside the caller's memory).
 * A copy to MTC_DEVICE_CPU copies a strided leaf (it reuses contiguous host
 * leaves). Threads: as every call on a plan. */
MTC_API mtc_status mtc_plan_set_leaf_layout(mtc_plan *plan, uint64_t index,
                                            const mtc_leaf_layout *layout);

/* ----------------------------------------------------------------- stats */

/* Library-wide counters, for tests, benchmarks and leak checks. */
typedef struct mtc_stats {
  uint32_t struct_size;
  uint32_t staging_threads;      /* size of the shared staging pool */
  uint64_t plans_live;           /* plans created and not yet released */
  uint64_t blocks_live;          /* blocks not yet freed (host and device) */
  uint64_t device_bytes_live;    /* bytes in live device blocks */
  uint64_t host_bytes_live;      /* bytes in live host blocks */
  uint64_t pinned_bytes_cached;  /* pinned bytes idle in the pool */
  uint64_t pinned_bytes_in_use;  /* pinned bytes lent out: staging of copies
                                    in flight and pinned host blocks */
  uint64_t pinned_allocations;   /* cuMemHostAlloc calls so far */
  uint64_t pinned_reuses;        /* pool hits so far */
  uint64_t pinned_limit_bytes;   /* the limit on staging + idle (see
                                    mtc_set_pinned_limit); an older libmtc
                                    writes 0 here */
  /* 80 bytes up to here (the size in version 0.1). */
  uint64_t pinned_staging_bytes; /* pinned staging lent to copies now */
  uint64_t pinned_output_bytes;  /* pinned host blocks (outputs) held now:
                                    not limited */
  uint64_t pinned_high_water_bytes; /* most staging + idle at once since the
                                       limit was last set */
  uint64_t pinned_limit_waits;   /* staging requests that found the pool at
                                    its limit and waited */
  /* 112 bytes up to here (what earlier builds of 0.1 wrote). */
  uint64_t pinned_held_bytes;    /* pinned memory held by the caller
                                    (mtc_host_block_alloc) now */
  uint64_t pinned_held_limit_bytes; /* its limit */
} mtc_stats;

/* Writes the counters to *out. out->struct_size must be set, to at least
 * 80 (the size in version 0.1, which gets the fields up to pinned_reuses)
 * or to sizeof(mtc_stats). Any thread. */
MTC_API mtc_status mtc_get_stats(mtc_stats *out);

/* Frees idle pinned staging memory held by the pool. Any thread. */
MTC_API void mtc_trim_pools(void);

/* The pinned pool's limit. Page-locked memory is a machine-wide resource,
 * so the pinned memory the pool holds for staging (buffers lent to copies
 * in flight, and idle buffers kept for reuse) never exceeds this many
 * bytes. A staging request at the limit frees idle buffers, then waits for
 * copies in flight to give theirs back (it ends copies that are over even
 * if nobody polls them, and a copy that needs more than the limit goes
 * through it a piece at a time: each staging buffer takes at most a quarter
 * of the limit). Pinned host outputs (blocks of copies to the host, which
 * their owner may keep) are not limited: staging never waits for them.
 * Default: a quarter of the physical memory, at most 2 GiB; the environment
 * variable MTC_PINNED_LIMIT (bytes, with an optional k, m, g or t suffix:
 * KiB ... TiB), read once at first use, replaces it (a malformed or
 * out-of-range value is ignored: mtc_get_stats shows the limit in force).
 * Sets the limit (1 MiB .. 1 PiB, else MTC_ERR_INVALID_ARGUMENT) for copies
 * submitted from now on, frees idle buffers above it, and restarts the
 * high-water mark. Any thread. */
MTC_API mtc_status mtc_set_pinned_limit(uint64_t bytes);

/* Prepares device for its first copy, so that copy does not pay for what is
 * otherwise set up on first use: the device's context, copy stream, memory
 * pool and kernels; `pinned_bytes` of pinned staging memory in buffers of
 * `pinned_buffer_bytes` each (rounded up to the pool's size classes: pass
 * the stagingPieceBytes of the copies to come; 0 means 8 MiB), kept idle in
 * the pool within its limit; and `device_bytes` allocated once from the
 * device's pool and given back, so that the pool holds that much. The first
 * cuMemHostAlloc of 4 MB alone costs milliseconds. Pinned buffers already
 * idle count towards pinned_bytes; at the pool's limit it stops early and
 * returns MTC_OK (mtc_get_stats says what is cached). MTC_ERR_NO_DRIVER or
 * MTC_ERR_NO_DEVICE as for a copy; MTC_ERR_OUT_OF_MEMORY when an allocation
 * fails (what was reserved before stays). Any thread. */
MTC_API mtc_status mtc_warm_up(int32_t device, uint64_t pinned_bytes,
                               uint64_t pinned_buffer_bytes,
                               uint64_t device_bytes);

/* ---------------------------------------------------------------- streams */

/* Streams are CUstream handles carried as uint64_t, so that streams made by
 * other libraries (PyTorch, CuPy, ...) can be passed in as they are. 0 is
 * "no stream" (never the legacy default stream). */

/* Creates a non-blocking stream on device's primary context and writes its
 * CUstream to *out_stream. Destroy it with mtc_stream_destroy. */
MTC_API mtc_status mtc_stream_create(int32_t device, uint64_t *out_stream);

/* Destroys a stream made by mtc_stream_create (work queued on it still
 * runs). 0 is ignored; a failure sets mtc_last_error() only. */
MTC_API void mtc_stream_destroy(int32_t device, uint64_t stream);

/* Blocks until all work queued on stream (of device) has finished.
 * MTC_ERR_INVALID_ARGUMENT for stream 0. */
MTC_API mtc_status mtc_stream_synchronize(int32_t device, uint64_t stream);

/* A recorded CUDA event and the device it belongs to; refcounted. */
typedef struct mtc_event mtc_event;

/* Records a new event on stream (of device): it completes when all work
 * queued on stream before this call has finished. Writes a new reference
 * (release it with mtc_event_release) to *out_event, or NULL on error.
 * MTC_ERR_INVALID_ARGUMENT for stream 0. */
MTC_API mtc_status mtc_event_record(int32_t device, uint64_t stream,
                                    mtc_event **out_event);

/* Makes work queued on stream (of device) after this call wait for event,
 * without blocking the host. The event may belong to another device. */
MTC_API mtc_status mtc_stream_wait_event(int32_t device, uint64_t stream,
                                         const mtc_event *event);

/* MTC_OK when the event has completed, MTC_IN_PROGRESS when not; never
 * blocks. */
MTC_API mtc_status mtc_event_query(const mtc_event *event);

/* Blocks until the event has completed. */
MTC_API mtc_status mtc_event_synchronize(const mtc_event *event);

/* The event's CUevent, for other libraries to wait on; valid while a
 * reference is held. 0 for NULL. */
MTC_API uint64_t mtc_event_handle(const mtc_event *event);

/* Adds / drops a reference. The last release destroys the event. NULL is
 * ignored. Any thread. Undefined: more releases than references, and any
 * use of the event after the last one. */
MTC_API void mtc_event_retain(mtc_event *event);
MTC_API void mtc_event_release(mtc_event *event);

/* Tells the plan which stream of `device` the caller's work runs on. Only
 * before submit; one stream per device: a second call for the same device
 * replaces the first, and stream 0 removes it. The stream is used at
 * submit only (an invalid one is reported there, naming the device), and
 * only where the plan reads leaves on `device` or copies to it. At submit:
 *  - leaves on `device` are read only after the work queued on `stream`
 *    before submit (an event recorded on it at submit time);
 *  - when `device` is the plan's target, `stream` waits for the copy's
 *    completion, so work queued on it after submit sees the copied data
 *    with no host synchronization. Submission then enqueues the copy on the
 *    calling thread (staging included) before it returns, whatever
 *    use_background_thread says, since the wait must be queued before the
 *    caller's next work.
 * poll and wait still wait for this copy only, never for the caller's
 * streams. */
MTC_API mtc_status mtc_plan_set_stream(mtc_plan *plan, int32_t device,
                                       uint64_t stream);

/* After submit: writes a new reference to an event that completes with the
 * copy (on the target device; on the source device for copies to the host,
 * the first one when there are several: one event covers all of the copy's
 * device work) to *out_event, or NULL when the copy needs no device work.
 * Release it with mtc_event_release; it may outlive the plan. While a
 * background submission is still staging, this waits until the copy is
 * enqueued (not until it completes). After a failed submit it returns the
 * plan's error. */
MTC_API mtc_status mtc_plan_completion_event(mtc_plan *plan,
                                             mtc_event **out_event);

/* ------------------------------------------------------------ plan stats */

/* How device-to-host leaves were copied (mtc_plan_stats.device_to_host_path). */
enum {
  MTC_PATH_NONE = 0,         /* no device-to-host leaves */
  MTC_PATH_PER_LEAF = 1,     /* one copy per leaf */
  MTC_PATH_BATCHED = 2,      /* one batched driver call (not used yet) */
  MTC_PATH_GATHER_KERNEL = 3 /* one kernel per source device writes the
                                small leaves into pinned host memory */
};

/* What one plan did. */
typedef struct mtc_plan_stats {
  uint32_t struct_size;
  uint32_t device_to_host_path; /* MTC_PATH_* */
  uint64_t leaves;              /* leaves added */
  uint64_t leaves_reused;       /* already on the target: not copied */
  uint64_t leaves_packed;       /* copied as part of a chunk */
  uint64_t chunks;              /* packed chunks */
  uint64_t blocks;              /* blocks made (chunks and own leaves) */
  uint64_t bytes_copied;        /* bytes of leaves copied */
  uint64_t copies_issued;       /* DMA / kernel submissions (copies
                                   between host blocks are not counted) */
  /* Pinned buffers this plan took (staging, pinned output blocks, gather
   * tables): from the pool, or newly allocated. */
  uint64_t pinned_reuses;
  uint64_t pinned_allocations;
  uint64_t staging_ns;          /* host time spent staging (memcpy) */
  uint64_t submit_ns;           /* host time from submit to last enqueue
                                   (a background submission's wait in the
                                   queue included) */
  /* 96 bytes up to here (what earlier builds of 0.1 wrote). */
  uint64_t leaves_direct;       /* leaves read or written in place in pinned
                                   memory (MTC_RESULT_DIRECT) */
  uint64_t bytes_staged;        /* bytes memcpy'd into staging */
} mtc_plan_stats;

/* Writes the plan's stats to *out (out->struct_size must be set). Counts are
 * final once poll or wait returned MTC_OK. Before submit only `leaves` is
 * set; the layout's counts (reused, packed, chunks, bytes_copied) from
 * submit on; the submission's (the rest) once it has enqueued the copy.
 * device_to_host_path: GATHER_KERNEL when a gather kernel copied small
 * leaves to the host (large ones always take one DMA each), PER_LEAF when
 * only DMAs did. */
MTC_API mtc_status mtc_plan_get_stats(const mtc_plan *plan,
                                      mtc_plan_stats *out);

/* ----------------------------------------------------------- test kernels */

/* Nonzero when this build carries its CUDA kernels (built with nvcc): the
 * gather kernel for device-to-host and batched device-to-device copies, and
 * the two kernels below. */
MTC_API int32_t mtc_has_kernels(void);

/* For tests and demonstrations of stream ordering: queues a kernel on
 * stream (of device) that spins for spin_microseconds, then sets `bytes`
 * bytes at device address `address` to value_byte. MTC_ERR_UNSUPPORTED
 * without kernels. */
MTC_API mtc_status mtc_debug_fill(int32_t device, uint64_t stream,
                                  uint64_t address, uint64_t bytes,
                                  uint32_t value_byte,
                                  uint32_t spin_microseconds);

/* For tests: queues a kernel on stream (of device) that copies `bytes` bytes
 * from device address src to dst (a kernel that reads copied data, unlike a
 * DMA). MTC_ERR_UNSUPPORTED without kernels. */
MTC_API mtc_status mtc_debug_copy(int32_t device, uint64_t stream,
                                  uint64_t dst, uint64_t src, uint64_t bytes);

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


/* ------------------------------------------- copies into existing memory */

/* mtc_leaf_result.flags of a leaf added with mtc_plan_add_leaves_into: the
 * result's address is its destination; block is NULL. */
enum { MTC_RESULT_INTO = 4u };

/* Appends count leaves, each copied into memory that already exists rather
 * than into a block the plan makes: leaves[k] is copied into
 * destinations[k], which is an mtc_leaf too (address, bytes, device and
 * element_size are read; row_count must be 0 or 1: destinations are
 * contiguous; row_pitch and flags are ignored). For CUDA graphs, decode
 * steps and reused buffers.
 *
 * Each destination must hold exactly the leaf's bytes, have the leaf's
 * element_size, and lie on the plan's target device (device memory of the
 * target, or host memory for MTC_DEVICE_CPU). Aliasing is refused, not
 * ordered: at submit, a destination that shares a byte with another
 * destination, with its own leaf, or with any other leaf's source on the
 * same device (a swap {a: X, b: Y} -> {a: Y, b: X}, a chain X -> Y -> Z,
 * views into one block) is MTC_ERR_INVALID_ARGUMENT naming the later leaf
 * (mtc_plan_error_leaf) and, in the message, the other one, before
 * anything is copied; the other checks are made here, and on error no leaf
 * of the call is added.
 *
 * A plan takes either leaves with destinations or leaves without them:
 * mixing this call with mtc_plan_add_leaf(s) on one plan is
 * MTC_ERR_INVALID_STATE. No leaf is reused: a leaf already on the target is
 * copied too.
 *
 * How each direction runs:
 *  - host -> device: packed leaves are staged into pinned memory together
 *    with a table of where each goes and placed by one scatter kernel a
 *    chunk: a chunk of up to 64 KiB (with its table) read where it lies in
 *    pinned staging, a larger one (or one staged in pageable memory) after
 *    one DMA into a scratch block of the target (without kernels, one DMA a
 *    leaf from the staging); large leaves are
 *    streamed through pinned pieces straight into their destination.
 *  - device -> the same device: the packed leaves by one kernel launch
 *    writing every destination (without kernels one copy a leaf), large
 *    leaves one copy each. Device -> another device: the same launch on
 *    the source device when every packed leaf's destination was named a
 *    block of libmtc's (mtc_plan_set_destination_blocks) and the pair has
 *    peer access; otherwise, and for large leaves, one peer copy a leaf (a
 *    destination may come from any allocator, which a kernel on the source
 *    device might not reach).
 *  - device -> host: into pinned memory as for mtc_plan_add_leaves (the
 *    gather kernel), then copied into the destinations by the caller's
 *    mtc_plan_poll or mtc_plan_wait that finds the copy's device work over,
 *    on the calling thread; the plan is done only after that. Never by
 *    mtc_plan_release (which drops the write), nor by a library thread or
 *    another copy's staging request at the pinned pool's limit.
 *  - host -> host: likewise, copied by that poll or wait (the sources are
 *    read then).
 *
 * Ordering: plans reach the copy streams in the order they were submitted,
 * whether carried out by the background thread or on the caller's thread,
 * so two copies into one device destination land in submission order. Two
 * copies into one host destination land in the order their polls or waits
 * write them: poll them in submission order, or mark the earlier plan's
 * leaf with mtc_plan_skip_copy_out. With a stream of the caller's set on
 * the target (mtc_plan_set_stream), the copy writes destinations only
 * after the work queued there before submit, so a kernel still reading the
 * previous contents is not overwritten under it; the stream then waits for
 * the copy as for any plan.
 *
 * Ownership: the caller keeps the destination memory; it must stay valid,
 * and nobody else may read or write it, until the copy has finished (poll
 * or wait returned MTC_OK, or mtc_plan_release returned). Host
 * destinations are written only inside the caller's poll or wait, so a
 * caller that frees one first must release the plan instead of polling it. Results
 * (mtc_plan_results) give each destination's address, MTC_RESULT_INTO and
 * no block. mtc_plan_stop_reading stops the writes into host destinations
 * as well as the reads (a copy that still had to write them fails with
 * MTC_ERR_INVALID_STATE). Threads: as mtc_plan_add_leaves. Undefined: either
 * array holding fewer than count entries. */
MTC_API mtc_status mtc_plan_add_leaves_into(mtc_plan *plan,
                                            const mtc_leaf *leaves,
                                            const mtc_leaf *destinations,
                                            uint64_t count);

/* For a plan of copies into existing memory (mtc_plan_add_leaves_into):
 * says which destinations lie in device blocks of libmtc's (from
 * mtc_device_block_alloc, or the results of a copy): blocks[k] holds the
 * destination of leaf first + k, or is NULL for memory of any other
 * origin. Between two GPUs this decides the path: the packed leaves of a
 * source device go by one gather kernel launched on the source device,
 * writing into the target's memory over peer access, only when the pair
 * has peer access and every one of their destinations is such a block
 * (libmtc opens its own pool to the source device; memory of another
 * allocator may be out of a kernel's reach there, and a stray write would
 * be fatal to the context); otherwise each takes one peer copy, which
 * reaches any memory. MTC_TRACE=1 prints which path each source device
 * took and why. Nothing else changes: results, ordering and ownership are
 * as for mtc_plan_add_leaves_into.
 *
 * Each block is checked, not trusted: it must be a device block on the
 * destination's device holding all of the destination's bytes. The plan
 * retains each block until it is released; a later call for the same
 * leaf replaces its block. Errors, with nothing recorded:
 * MTC_ERR_INVALID_STATE after submit or on a plan of plain leaves;
 * MTC_ERR_INVALID_ARGUMENT for leaves past the plan's count, blocks NULL
 * with count > 0, or a block that fails its check (naming the leaf,
 * mtc_plan_error_leaf). Threads: as mtc_plan_add_leaves. Undefined: blocks
 * holding fewer than count entries, or an entry that is not a live
 * block. */
MTC_API mtc_status mtc_plan_set_destination_blocks(mtc_plan *plan,
                                                   uint64_t first,
                                                   mtc_block *const *blocks,
                                                   uint64_t count);

/* ------------------------------------------------ device memory and kernels */

/* mtc_device_block_alloc flags. */
enum {
  MTC_ALLOC_ZERO = 1 /* the memory reads as zeros */
};

/* Allocates `bytes` bytes of memory on CUDA device `device` as a new block
 * with one reference, written to *out_block (release it with
 * mtc_block_release; mtc_block_get_info gives its address). The memory
 * comes from the device's pool, like a copy's output blocks. With
 * MTC_ALLOC_ZERO it reads as zeros, otherwise its contents are undefined.
 * Returns once the memory may be used from any stream of the device (the
 * allocation and the zeroing are ordered on the library's copy stream of
 * the device, which this waits for). 0 bytes checks the device and writes
 * NULL. Errors: MTC_ERR_INVALID_ARGUMENT for a negative device or unknown
 * flags, MTC_ERR_NO_DRIVER / MTC_ERR_NO_DEVICE as for a copy,
 * MTC_ERR_OUT_OF_MEMORY when the device has no room; *out_block is then
 * NULL. Any thread. */
MTC_API mtc_status mtc_device_block_alloc(int32_t device, uint64_t bytes,
                                          uint32_t flags,
                                          mtc_block **out_block);

/* ----------------------------------------------------- pinned host memory */

/* Allocates `bytes` (> 0) of page-locked host memory as a new block with
 * one reference, written to *out_block (mtc_block_get_info gives its
 * address; the capacity is rounded up to the pinned pool's size classes,
 * powers of two from 64 KiB, and comes from the pool when an idle buffer
 * fits). `device` is the CUDA device whose context allocates it; the
 * memory is usable by every device. Its contents are undefined.
 *
 * The caller fills it and adds leaves inside it with MTC_LEAF_PINNED: a
 * copy to a device then DMAs them from where they lie, with no staging
 * copy; leaves lying near each other in one block go as one DMA, into one
 * device block that keeps their distances. A copy into destinations inside
 * it (mtc_plan_add_leaves_into, from a device) writes them in place by the
 * GPU, with no copy-out. Such copies read or write the memory after
 * mtc_plan_submit returns, until the plan's completion: writing it
 * meanwhile changes what is copied. mtc_block_busy says when it may be
 * written again. A copy holds a reference to the block until it is over.
 *
 * What callers hold this way counts against its own limit, not the
 * pinned pool's (staging would otherwise wait for memory only the caller
 * can give back): mtc_set_pinned_held_limit, default a quarter of the
 * physical memory, at most 8 GiB, or MTC_PINNED_HELD_LIMIT (bytes, k/m/g/t
 * suffixes). Errors: MTC_ERR_INVALID_ARGUMENT (negative device, 0 bytes),
 * MTC_ERR_NO_DRIVER / MTC_ERR_NO_DEVICE, MTC_ERR_OUT_OF_MEMORY past that
 * limit (the message names it) or when the driver has none. Any thread. */
MTC_API mtc_status mtc_host_block_alloc(int32_t device, uint64_t bytes,
                                        mtc_block **out_block);

/* 1 while a copy submitted so far reads or writes pinned block `block` in
 * place (from its mtc_plan_submit until its device work is over, whether
 * or not anyone polls it), else 0 (also for NULL and blocks of other
 * kinds). Once it is 0, writes to the memory reach no copy submitted
 * before. Any thread. */
MTC_API int32_t mtc_block_busy(mtc_block *block);

/* Blocks until mtc_block_busy(block) would be 0 for the copies submitted
 * before this call. MTC_ERR_CUDA when the driver reports a failed copy.
 * Any thread. */
MTC_API mtc_status mtc_block_wait_idle(mtc_block *block);

/* Sets the limit on pinned memory held through mtc_host_block_alloc
 * (1 MiB .. 1 PiB, else MTC_ERR_INVALID_ARGUMENT); blocks held already
 * stay. Any thread. */
MTC_API mtc_status mtc_set_pinned_held_limit(uint64_t bytes);

/* A CUDA module loaded into a device's primary context: user kernels from
 * PTX text, a cubin or a fatbin, compiled by the driver (no CUDA toolkit at
 * run time). */
typedef struct mtc_module mtc_module;

/* Loads `bytes` bytes of a module image (PTX text, which need not end in a
 * NUL; or cubin / fatbin bytes) on `device` with cuModuleLoadData, and
 * writes the module to *out_module (NULL on error). The image is copied;
 * the caller keeps it. Errors name the driver's code and text:
 * MTC_ERR_CUDA for an image the driver rejects (CUDA_ERROR_INVALID_IMAGE,
 * CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NO_BINARY_FOR_GPU, ...), followed by
 * the JIT compiler's error log when it wrote one (cuModuleLoadDataEx),
 * MTC_ERR_UNSUPPORTED for a driver without module calls. Any thread. */
MTC_API mtc_status mtc_module_load(int32_t device, const void *image,
                                   uint64_t bytes, mtc_module **out_module);

/* Unloads the module: its functions may no longer be launched (launches
 * already queued still run). NULL is ignored. */
MTC_API void mtc_module_unload(mtc_module *module);

/* Writes the CUfunction of the kernel `name` (a NUL-terminated, unmangled
 * or mangled entry name) to *out_function: valid until the module is
 * unloaded. MTC_ERR_CUDA (CUDA_ERROR_NOT_FOUND) when the module has no
 * such kernel. */
MTC_API mtc_status mtc_module_get_function(mtc_module *module,
                                           const char *name,
                                           uint64_t *out_function);

/* Queues kernel `function` (of `module`) on `stream` (a CUstream of the
 * module's device, not 0) with cuLaunchKernel.
 *  - dims: 7 values: grid x, y, z, block x, y, z, dynamic shared memory
 *    bytes; every grid and block extent at least 1.
 *  - params: param_count parameters, parameter i at params +
 *    param_offsets[i] (offsets below params_bytes), each as many bytes as
 *    the kernel declares it (a device pointer is 8 bytes).
 *  - blocks: block_count blocks (NULL entries skipped) that the kernel
 *    reads or writes: each is retained until the stream has passed the
 *    launch (an event recorded after it), so that releasing them meanwhile
 *    frees nothing the kernel still uses. mtc_launches_settle, later
 *    launches and mtc_stream_synchronize release them.
 * Returns once the launch is queued; a failed launch (bad dimensions,
 * shared memory or parameters the driver rejects) is MTC_ERR_CUDA with the
 * driver's error name and text, and retains nothing. Should the event after
 * a queued launch fail, the call waits for the stream instead (so nothing
 * needs holding) and returns that error. MTC_ERR_INVALID_ARGUMENT for a
 * zero extent, stream 0 or an offset outside params. Any thread. */
MTC_API mtc_status mtc_kernel_launch(mtc_module *module, uint64_t function,
                                     uint64_t stream, const uint32_t *dims,
                                     const void *params, uint64_t params_bytes,
                                     const uint32_t *param_offsets,
                                     uint32_t param_count,
                                     mtc_block *const *blocks,
                                     uint32_t block_count);

/* Releases the blocks of launches that their streams have passed; with
 * wait nonzero, first waits for every launch still holding blocks. Returns
 * how many launches still hold blocks. Any thread. */
MTC_API uint32_t mtc_launches_settle(int32_t wait);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MTC_H */
