/**
 * Leaf paths for error messages (`[3].cams_gt[2].depths`): where a container
 * sits in the batch, and how a path is written.
 *
 * @module
 */

/** Container kinds, as the walk tells them apart. */
export const ARRAY = 0;
export const OBJECT = 1;
export const MAP = 2;
export type Kind = typeof ARRAY | typeof OBJECT | typeof MAP;

/**
 * Where a container sits: its parent container and its key there (the root
 * container has parent null), and what kind of container it is.
 */
export interface PathNode {
  readonly parent: PathNode | null;
  readonly key: unknown;
  readonly kind: Kind;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function segment(kind: Kind, key: unknown): string {
  if (kind === ARRAY) return `[${key as number}]`;
  if (kind === OBJECT) {
    const k = key as string;
    return IDENTIFIER.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
  }
  switch (typeof key) {
    case "number":
      return `[${Number.isFinite(key) ? JSON.stringify(key) : String(key)}]`; // NaN, Infinity have no JSON
    case "string":
    case "boolean":
      return `[${JSON.stringify(key)}]`;
    case "bigint":
      return `[${key}n]`;
    case "symbol":
      return `[${key.toString()}]`;
    default:
      return key === null ? "[null]" : `[${String(key)}]`;
  }
}

/**
 * The path of the value at `key` in the container at `node` (null and an
 * undefined key: the root itself). See MtcError for the format.
 */
export function formatPath(node: PathNode | null, key?: unknown): string {
  if (node === null) return "";
  const parts = [segment(node.kind, key)];
  for (let n = node; n.parent !== null; n = n.parent) parts.push(segment(n.parent.kind, n.key));
  return parts.reverse().join("");
}
