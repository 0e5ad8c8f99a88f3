/**
 * Which copy of the library an object belongs to. A program can load the
 * library more than once: a worker script beside the main bundle, two
 * installs of the npm package, `npm:` beside `node_modules`, an app's
 * bundle beside the package. Each copy has its own classes, its own private
 * state and its own pinned-buffer map, so an object of one is nothing the
 * other can read; `instanceof` alone would make it a plain class instance,
 * passed through a copy as data.
 *
 * Two things keep one class identity:
 * - the npm package's entry (ts/npm.ts) exports what the first copy of the
 *   same version registered in this realm ({@link adoptCopy}), so every
 *   copy of one version that goes through it is one set of classes;
 * - each public class's prototype carries a mark ({@link markClass}): the
 *   version and the URL of the copy that made it, frozen. Where a walk
 *   would pass an object through as data, a mark of another copy makes it
 *   an MtcError naming both copies ({@link otherCopyMark},
 *   {@link otherCopyError}). The mark is only
 *   ever a reason to refuse: what the library accepts is still recognised
 *   by its private state, never by a mark or a public field.
 *
 * @module
 */

import { invalidArgument, type MtcError } from "./errors.ts";

/**
 * The version of these bindings: package.json's and deno.json's
 * (tests/package/version.test.ts checks that they agree).
 */
export const BINDINGS_VERSION = "0.1.0";

/** Where this copy was loaded from: this module's URL (a bundle's, once bundled). */
const WHERE: string = import.meta.url;

/** The key of every copy's mark, whatever its version. */
const MARK_KEY = Symbol.for("multi-tensor-copier.copy");

/** The key under which the first copy of this version in a realm registers its exports. */
const REGISTRY_KEY = Symbol.for(`multi-tensor-copier@${BINDINGS_VERSION}`);

/** What a mark says: the class, and the copy that made it. */
export interface CopyMark {
  readonly version: string;
  readonly where: string;
  readonly kind: string;
}

/** This copy's marks, by identity: a copy of one of them elsewhere is no mark of ours. */
const ours = new WeakSet<object>();

/**
 * @internal Marks the prototype of one of the library's public classes as
 * this copy's `kind` ("Tensor"): a frozen {library, version, where, kind},
 * neither writable nor configurable.
 */
export function markClass(cls: { readonly prototype: object }, kind: string): void {
  const mark = Object.freeze({ library: "multi-tensor-copier", version: BINDINGS_VERSION, where: WHERE, kind });
  ours.add(mark);
  Object.defineProperty(cls.prototype, MARK_KEY, { value: mark });
}

/** A data property's string value, never a getter's. */
function ownString(value: object, name: string): string | undefined {
  const d = Object.getOwnPropertyDescriptor(value, name);
  return d !== undefined && "value" in d && typeof d.value === "string" ? d.value : undefined;
}

/** What a mark found on an object says, or undefined for anything that is no frozen mark of a copy. */
function readMark(value: unknown): CopyMark | undefined {
  if (typeof value !== "object" || value === null || ours.has(value) || !Object.isFrozen(value)) return undefined;
  if (ownString(value, "library") !== "multi-tensor-copier") return undefined;
  const version = ownString(value, "version");
  const where = ownString(value, "where");
  const kind = ownString(value, "kind");
  return version === undefined || where === undefined || kind === undefined ? undefined : { version, where, kind };
}

/**
 * The mark of another copy on `value` or its prototypes (read once: give it
 * to {@link otherCopyError}), or undefined. Marks are read as data
 * descriptors (a getter is never called), at every level: a mark of ours
 * put on an object of another copy hides nothing.
 */
export function otherCopyMark(value: unknown): CopyMark | undefined {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return undefined;
  let at: object | null = value as object;
  for (let depth = 0; at !== null && depth < 64; depth++) {
    const d = Object.getOwnPropertyDescriptor(at, MARK_KEY);
    const mark = d !== undefined && "value" in d ? readMark(d.value) : undefined;
    if (mark !== undefined) return mark;
    at = Object.getPrototypeOf(at);
  }
  return undefined;
}

/** "multi-tensor-copier 0.2.0 (loaded from file:///…)" */
function describeCopy(version: string, where: string): string {
  return `multi-tensor-copier ${version} (loaded from ${where})`;
}

/** What `mark` says an object is: "a DeviceTensor of multi-tensor-copier 0.2.0 (loaded from …)". */
function describeObject(mark: CopyMark): string {
  const same = mark.version === BINDINGS_VERSION ? "another copy of " : "";
  const article = /^[AEIOU]/.test(mark.kind) ? "an" : "a";
  return `${article} ${mark.kind} of ${same}${describeCopy(mark.version, mark.where)}`;
}

/**
 * When `value` is an object of another copy of the library (another
 * version, or one of this version that did not adopt this copy): what it
 * is, "a DeviceTensor of multi-tensor-copier 0.2.0 (loaded from …)"; else
 * undefined (anything else, this copy's objects included). For the walks
 * and for moveResult, where such an object would pass through as data.
 */
export function foreignCopy(value: unknown): string | undefined {
  const mark = otherCopyMark(value);
  return mark === undefined ? undefined : describeObject(mark);
}

/**
 * The MtcError for an object of another copy (`mark`, from
 * {@link otherCopyMark}) at the leaf `path`, naming both copies; `call`
 * prefixes the message ("disposeAll: ").
 */
export function otherCopyError(mark: CopyMark, path?: string, call = ""): MtcError {
  const why = mark.version === BINDINGS_VERSION
    ? "two copies of one version share their classes only through the npm package's entry"
    : "each version keeps the state of its objects to itself";
  return invalidArgument(
    `${call}${describeObject(mark)}, which this copy, ${describeCopy(BINDINGS_VERSION, WHERE)}, cannot use: ${why}; ` +
      'pass it to the copy that made it, or load one copy (docs/INSTALL.md, "One copy of the library")',
    path,
  );
}

/**
 * The npm package's entry: the exports of the first copy of this version
 * that registered in this realm, or `own`, registered now when none did
 * (neither writable nor configurable: nothing replaces it later). So a
 * worker script, a second install or `npm:` beside `node_modules` use one
 * set of classes, one pinned-buffer map and one libmtc. Something at the
 * key that is not such exports (it lacks one of `own`'s names) is left
 * alone, and `own` is used: objects are then refused between the copies.
 */
export function adoptCopy<T extends object>(own: T): T {
  const g = globalThis as unknown as Record<symbol, unknown>;
  const found = Object.getOwnPropertyDescriptor(g, REGISTRY_KEY);
  if (found === undefined) {
    Object.defineProperty(g, REGISTRY_KEY, { value: own });
    return own;
  }
  const first: unknown = "value" in found ? found.value : undefined;
  if (typeof first !== "object" || first === null) return own;
  // Its exports are read as the first copy made them: a bundle's namespace has getters.
  for (const name of Object.keys(own)) {
    if (typeof (first as Record<string, unknown>)[name] !== typeof (own as Record<string, unknown>)[name]) return own;
  }
  return first as T;
}
