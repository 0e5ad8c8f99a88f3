/**
 * The one symbol table of libmtc (lib/include/mtc.h), in a neutral form that
 * ts/ffi/bun.ts and ts/ffi/deno.ts turn into each runtime's own.
 *
 * Neutral kinds:
 * - "ptr": an opaque C handle or pointer (mtc_plan *, mtc_block *), carried
 *   in JavaScript as a plain number (x86-64 and arm64 user addresses fit in
 *   a double). Declared as a 64-bit integer on both runtimes.
 * - "buffer": a typed array the callee reads or writes during the call only
 *   (in-structs, out-structs, out-parameters such as `mtc_plan **`).
 * - "i32", "u32", "i64", "u64": integers, as numbers on the JavaScript side.
 * - "cstring" (results only): a NUL-terminated string, read into a JS string.
 * - "void" (results only).
 *
 * An entry with `nonblocking: true` is a second binding of the C function
 * named by `name` that runs on a runtime thread and returns a Promise
 * (Deno only; Bun has no such calls and leaves it out).
 *
 * An entry with `optional: true` is a function added after 0.1.0: a library
 * without it still loads, the bound table lacks the entry, and the feature
 * that needs it throws MtcError (MTC_ERR_UNSUPPORTED) naming the function
 * (see `requireSymbol` in library.ts).
 *
 * @module
 */

import { kernelSymbols } from "./kernel_symbols.ts";
import { ownerSymbols } from "./owner_symbols.ts";
import { deviceSymbols } from "./device_symbols.ts";
import { preparedSymbols } from "./prepared_symbols.ts";
import type { ArgKind, SymbolSpec } from "./spec.ts";

export type { ArgKind, ResultKind, SymbolSpec } from "./spec.ts";

/** The version of the ABI these bindings were written for (MTC_VERSION_NUMBER). */
export const EXPECTED_VERSION_NUMBER = 100; // 0.1.0

export const symbols = {
  // ------------------------------------------------------------- version
  mtc_version_number: { args: [], result: "u32" /* uint32_t */ },
  mtc_version_string: { args: [], result: "cstring" /* const char * */ },

  // -------------------------------------------------------------- status
  mtc_status_name: {
    args: ["i32" /* int32_t status */],
    result: "cstring", /* const char * */
  },
  mtc_last_error: { args: [], result: "cstring" /* const char * */ },

  // ------------------------------------------------------------- devices
  mtc_cuda_device_count: {
    args: ["buffer" /* int32_t *out_count */],
    result: "i32", /* mtc_status */
  },
  mtc_cuda_current_device: {
    args: ["buffer" /* int32_t *out_device */],
    result: "i32", /* mtc_status */
  },

  // ------------------------------------------------------------- options
  mtc_options_init: {
    args: ["buffer" /* mtc_options *options */],
    result: "void",
  },

  // -------------------------------------------------------------- blocks
  mtc_block_retain: { args: ["ptr" /* mtc_block *block */], result: "void" },
  mtc_block_release: { args: ["ptr" /* mtc_block *block */], result: "void" },
  mtc_block_get_info: {
    args: [
      "ptr", /* const mtc_block *block */
      "buffer", /* mtc_block_info *out */
    ],
    result: "i32", /* mtc_status */
  },

  // --------------------------------------------------------------- plans
  mtc_plan_create: {
    args: [
      "i32", /* int32_t target_device */
      "buffer", /* const mtc_options *options */
      "buffer", /* mtc_plan **out_plan */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_add_leaf: {
    args: [
      "ptr", /* mtc_plan *plan */
      "buffer", /* const mtc_leaf *leaf */
      "buffer", /* uint64_t *out_index (may be NULL) */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_leaves_set_addresses: {
    args: [
      "buffer", /* mtc_leaf *leaves */
      "u64", /* uint64_t first */
      "u32", /* uint32_t count */
      "buffer", /* const void *view0 */
      "buffer", /* const void *view1 */
      "buffer", /* const void *view2 */
      "buffer", /* const void *view3 */
      "buffer", /* const void *view4 */
      "buffer", /* const void *view5 */
      "buffer", /* const void *view6 */
      "buffer", /* const void *view7 */
    ],
    result: "i32", /* mtc_status */
    optional: true,
  },
  mtc_plan_add_leaves: {
    args: [
      "ptr", /* mtc_plan *plan */
      "buffer", /* const mtc_leaf *leaves */
      "u64", /* uint64_t count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_set_leaf_layout: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "u64", /* uint64_t index */
      "buffer", /* const mtc_leaf_layout *layout */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_add_leaves_into: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "buffer", /* const mtc_leaf *leaves */
      "buffer", /* const mtc_leaf *destinations */
      "u64", /* uint64_t count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_set_destination_blocks: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "u64", /* uint64_t first */
      "buffer", /* mtc_block *const *blocks */
      "u64", /* uint64_t count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_leaf_count: {
    args: ["ptr" /* const mtc_plan *plan */],
    result: "u64", /* uint64_t */
  },
  mtc_plan_submit: { args: ["ptr" /* mtc_plan *plan */], result: "i32" /* mtc_status */ },
  mtc_plan_poll: { args: ["ptr" /* mtc_plan *plan */], result: "i32" /* mtc_status */ },
  mtc_plan_stop_reading: {
    optional: true,
    args: ["ptr" /* mtc_plan *plan */, "u32" /* uint32_t timeout_ms */],
    result: "i32", /* mtc_status */
  },
  mtc_plan_wait: { args: ["ptr" /* mtc_plan *plan */], result: "i32" /* mtc_status */ },
  // mtc_plan_wait_device run on a Deno FFI thread: `await handle` without
  // blocking the event loop. mtc.h allows a wait from another thread, and a
  // release lets one that already blocks return first; one still on its way
  // in is not covered, so the handle defers its release until it settles;
  // this one never writes host destinations, which the handle's own poll or
  // wait then writes on the thread that owns them.
  mtc_plan_wait_nonblocking: {
    name: "mtc_plan_wait_device",
    nonblocking: true,
    optional: true,
    args: ["ptr" /* mtc_plan *plan */],
    result: "i32", /* mtc_status */
  },
  mtc_plan_poll_device: { optional: true, args: ["ptr" /* mtc_plan *plan */], result: "i32" /* mtc_status */ },
  mtc_plan_skip_copy_out: {
    optional: true,
    args: ["ptr" /* mtc_plan *plan */, "u64" /* uint64_t leaf */],
    result: "i32", /* mtc_status */
  },
  mtc_plan_results: {
    args: [
      "ptr", /* mtc_plan *plan */
      "u64", /* uint64_t first */
      "u64", /* uint64_t count */
      "buffer", /* mtc_leaf_result *out */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_last_error: {
    args: ["ptr" /* const mtc_plan *plan */],
    result: "cstring", /* const char * */
  },
  mtc_plan_error_leaf: {
    args: ["ptr" /* const mtc_plan *plan */],
    result: "i64", /* int64_t */
  },
  mtc_plan_release: { args: ["ptr" /* mtc_plan *plan */], result: "void" },

  // --------------------------------------------------------------- stats
  mtc_get_stats: {
    args: ["buffer" /* mtc_stats *out */],
    result: "i32", /* mtc_status */
  },
  mtc_trim_pools: { args: [], result: "void" },
  mtc_set_pinned_limit: {
    optional: true,
    args: ["u64" /* uint64_t bytes */],
    result: "i32", /* mtc_status */
  },
  mtc_warm_up: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t pinned_bytes */
      "u64", /* uint64_t pinned_buffer_bytes */
      "u64", /* uint64_t device_bytes */
    ],
    result: "i32", /* mtc_status */
  },

  // ------------------------------------------------- blocks (0.1.x additions)
  // Bound for its address (Bun's toArrayBuffer deallocator), not called from JS.
  mtc_block_release_callback: {
    optional: true,
    args: [
      "ptr", /* void *bytes (ignored) */
      "ptr", /* void *block */
    ],
    result: "void",
  },

  // ------------------------------------------------------------- streams
  mtc_stream_create: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "buffer", /* uint64_t *out_stream */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_stream_destroy: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
    ],
    result: "void",
  },
  mtc_stream_synchronize: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_event_record: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
      "buffer", /* mtc_event **out_event */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_stream_wait_event: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
      "ptr", /* const mtc_event *event */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_event_query: { optional: true, args: ["ptr" /* const mtc_event *event */], result: "i32" /* mtc_status */ },
  mtc_event_synchronize: { optional: true, args: ["ptr" /* const mtc_event *event */], result: "i32" /* mtc_status */ },
  mtc_event_handle: { optional: true, args: ["ptr" /* const mtc_event *event */], result: "u64" /* uint64_t CUevent */ },
  mtc_event_retain: { optional: true, args: ["ptr" /* mtc_event *event */], result: "void" },
  mtc_event_release: { optional: true, args: ["ptr" /* mtc_event *event */], result: "void" },

  // ------------------------------------------------ plan streams and stats
  mtc_plan_set_stream: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_completion_event: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "buffer", /* mtc_event **out_event */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_plan_get_stats: {
    optional: true,
    args: [
      "ptr", /* const mtc_plan *plan */
      "buffer", /* mtc_plan_stats *out */
    ],
    result: "i32", /* mtc_status */
  },

  // -------------------------------------------------------- test kernels
  mtc_has_kernels: { optional: true, args: [], result: "i32" /* int32_t */ },
  mtc_debug_fill: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
      "u64", /* uint64_t address */
      "u64", /* uint64_t bytes */
      "u32", /* uint32_t value_byte */
      "u32", /* uint32_t spin_microseconds */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_debug_copy: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t stream */
      "u64", /* uint64_t dst */
      "u64", /* uint64_t src */
      "u64", /* uint64_t bytes */
    ],
    result: "i32", /* mtc_status */
  },

  // -------------------------------------------------------------- DLPack
  mtc_block_to_dlpack: {
    optional: true,
    args: [
      "ptr", /* mtc_block *block */
      "u64", /* uint64_t offset */
      "buffer", /* const int64_t *shape */
      "i32", /* int32_t ndim */
      "buffer", /* const DLDataType *dtype */
      "u32", /* uint32_t flags */
      "buffer", /* DLManagedTensorVersioned **out */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_leaf_from_dlpack: {
    optional: true,
    args: [
      "ptr", /* const DLManagedTensorVersioned *t */
      "buffer", /* mtc_leaf *out */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_dlpack_delete: { optional: true, args: ["ptr" /* DLManagedTensorVersioned *t */], result: "void" },

  // device memory and kernels (kernel_symbols.ts)
  ...kernelSymbols,
  // owners, refs and parcels (owner_symbols.ts)
  ...ownerSymbols,
  // prepared copies (prepared_symbols.ts)
  ...preparedSymbols,
  // what the driver says of the devices and of itself (device_symbols.ts)
  ...deviceSymbols,
} as const satisfies Record<string, SymbolSpec>;

/** The neutral table's type. */
export type Symbols = typeof symbols;

type ArgValue<K> = K extends "buffer" ? ArrayBufferView | null : number;
type ResultValue<K> = K extends "cstring" ? string : K extends "void" ? void : number;

type ArgValues<A extends readonly ArgKind[]> = { -readonly [I in keyof A]: ArgValue<A[I]> };

/** The JavaScript function one neutral entry becomes. */
export type NativeFunction<S extends SymbolSpec> = (
  ...args: ArgValues<S["args"]>
) => S extends { nonblocking: true } ? Promise<ResultValue<S["result"]>> : ResultValue<S["result"]>;

/** Names of the functions every supported libmtc has (synchronous, not optional). */
export type RequiredName = {
  [K in keyof Symbols]: Symbols[K] extends { nonblocking: true } | { optional: true } ? never : K;
}[keyof Symbols];
/** Names of the functions a library or runtime may lack: nonblocking bindings and later additions. */
export type OptionalName = Exclude<keyof Symbols, RequiredName>;

/** The bound library: every required function, and the optional ones where the library and runtime have them. */
export type NativeSymbols =
  & { readonly [K in RequiredName]: NativeFunction<Symbols[K]> }
  & { readonly [K in OptionalName]?: NativeFunction<Symbols[K]> };
