/**
 * Imported first by each entry (ts/mod.ts, ts/npm.ts): in a runtime that
 * is neither Bun nor Deno (Node.js), the import stops here with the one
 * message that says so. Without it, the first module-level line that needs
 * something Node lacks (Node 20 has no ArrayBuffer#detached) threw an
 * unrelated TypeError.
 *
 * @module
 */

import { MtcError, Status } from "./errors.ts";
import { runtime } from "./runtime.ts";

/** What the import says outside Bun and Deno. */
export const UNSUPPORTED_RUNTIME = "multi-tensor-copier runs on Bun or Deno (no FFI found): " +
  "Node.js is not supported, since the bindings need bun:ffi or Deno.dlopen; run this script with bun or deno";

if (runtime === "other") throw new MtcError(Status.MTC_ERR_UNSUPPORTED, UNSUPPORTED_RUNTIME);
