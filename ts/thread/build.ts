/**
 * Rebuilds a moved result's containers from its template (message.ts),
 * filled with the leaves and data in the order the sender visited them.
 *
 * A loader's consumer takes one structure again and again, so a template
 * that is a plain tree is compiled once into a function of nested object
 * and array literals: the engine then makes each container in one step
 * with its final shape, instead of growing it key by key. Nothing from the
 * message is evaluated: keys enter the code as JSON string literals, leaves
 * and data as indexes into the arrays given. Templates the compiler does
 * not take (a container held twice, very deep or very large ones, or a
 * runtime that forbids code from strings) are built by the generic loop,
 * which gives the same result.
 *
 * @module
 */

import { defineKey, reachesPrototype } from "../copy/traversal.ts";
import { ARRAY, BARE_OBJECT, DATA, LEAF, MAP, type Template } from "./message.ts";

/** Containers of a template filled with leaves and data. */
export type Build = (template: Template, leaves: unknown[], data: unknown[]) => unknown;

type Compiled = (leaves: unknown[], data: unknown[]) => unknown;

/** The realm's JSON.stringify as the library found it: keys are quoted by it, whatever code replaces it later. */
const quote = JSON.stringify;

/**
 * Past these, the generic loop: code this large or nested this deep costs
 * more to compile than it saves, and a literal of hundreds of thousands of
 * values overflows JavaScriptCore's stack when it runs.
 */
const MAX_COMPILED_CONTAINERS = 4096;
const MAX_COMPILED_ENTRIES = 20_000;
const MAX_COMPILED_DEPTH = 64;

/** Each template's compiled builder (null: it takes the generic loop). Templates are kept by message.ts, once per text. */
const compiled = new WeakMap<Template, Compiled | null>();

/** The containers of `template`, filled with `leaves` and `data`. */
export const build: Build = (template, leaves, data) => {
  const fn = compiledOf(template);
  if (fn === null) return buildEach(template, leaves, data);
  try {
    return fn(leaves, data);
  } catch {
    // Not expected under the limits above; the loop gives the same result, and this template takes it from now on.
    compiled.set(template, null);
    return buildEach(template, leaves, data);
  }
};

/** @internal The template's compiled builder, compiled on first use; null when it takes the generic loop. */
export function compiledOf(template: Template): Compiled | null {
  let fn = compiled.get(template);
  if (fn === undefined) {
    try {
      fn = compile(template);
    } catch {
      fn = null; // whatever stops the compiler (the realm's JSON changed, say), the loop builds the same
    }
    compiled.set(template, fn);
  }
  return fn;
}

/** The generic build: every container made empty, then filled entry by entry. */
export function buildEach(template: Template, leaves: unknown[], data: unknown[]): unknown {
  const containers = template.containers;
  const count = containers.length;
  const made = new Array<unknown>(count);
  for (let c = 0; c < count; c++) {
    const kind = containers[c]![0];
    made[c] = kind === ARRAY ? [] : kind === MAP ? new Map() : kind === BARE_OBJECT ? Object.create(null) : {};
  }
  let leaf = 0;
  let datum = 0;
  const value = (code: number) => (code === LEAF ? leaves[leaf++] : code === DATA ? data[datum++] : made[code]);
  for (let c = 0; c < count; c++) {
    const entries = containers[c]!;
    const kind = entries[0];
    const out = made[c];
    if (kind === ARRAY) {
      const array = out as unknown[];
      for (let i = 1; i < entries.length; i++) array.push(value(entries[i] as number));
    } else if (kind === MAP) {
      const map = out as Map<unknown, unknown>;
      for (let i = 1; i < entries.length; i += 2) {
        const key = value(entries[i] as number);
        map.set(key, value(entries[i + 1] as number));
      }
    } else {
      const object = out as Record<string, unknown>;
      for (let i = 1; i < entries.length; i += 2) {
        const key = entries[i] as string;
        const v = value(entries[i + 1] as number);
        // "__proto__" assigned would set the prototype (and a setter on Object.prototype take the value): an own key, as the sender had it.
        if (reachesPrototype(key)) defineKey(object, key, v);
        else object[key] = v;
      }
    }
  }
  return made[0];
}

/**
 * The builder of a template that is a tree (each container but the root
 * held once), as one function of nested literals; null when it is not, or
 * when the runtime refuses to compile it.
 */
function compile(template: Template): Compiled | null {
  const containers = template.containers;
  const count = containers.length;
  if (count === 0 || count > MAX_COMPILED_CONTAINERS) return null;
  let entries = 0;
  for (const container of containers) entries += container.length;
  if (entries > MAX_COMPILED_ENTRIES) return null;
  // Forward, in the generic build's order: which leaf and datum each entry takes, and each container's depth.
  const code: string[][] = containers.map(() => []);
  const depth = new Int32Array(count);
  const held = new Uint8Array(count);
  let leaf = 0;
  let datum = 0;
  for (let c = 0; c < count; c++) {
    for (const entry of containers[c]!.slice(1)) {
      if (typeof entry === "string") continue; // an object's key: written below
      if (entry === LEAF) code[c]!.push(`L[${leaf++}]`);
      else if (entry === DATA) code[c]!.push(`D[${datum++}]`);
      else {
        // A container held twice (or the root held): shared objects, which literals cannot make.
        if (entry <= c || held[entry] === 1) return null;
        held[entry] = 1;
        depth[entry] = depth[c]! + 1;
        if (depth[entry]! > MAX_COMPILED_DEPTH) return null;
        code[c]!.push(`\0${entry}`); // filled in by the backward pass
      }
    }
  }
  // Backward: a container's literal, once every container it holds (all later ones) has its own.
  const literal = new Array<string>(count);
  for (let c = count - 1; c >= 0; c--) {
    const entries = containers[c]!;
    const values = code[c]!.map((v) => (v.startsWith("\0") ? literal[Number(v.slice(1))]! : v));
    const kind = entries[0];
    if (kind === ARRAY) literal[c] = `[${values.join(",")}]`;
    else if (kind === MAP) {
      const pairs: string[] = [];
      for (let i = 0; i < values.length; i += 2) pairs.push(`[${values[i]},${values[i + 1]}]`);
      literal[c] = `new Map([${pairs.join(",")}])`;
    } else {
      const fields: string[] = kind === BARE_OBJECT ? ["__proto__:null"] : [];
      for (let i = 1, v = 0; i < entries.length; i += 2, v++) {
        const key = quote(entries[i] as string);
        // A computed "__proto__" is an own key; the plain one would set the prototype.
        fields.push(`${entries[i] === "__proto__" ? `[${key}]` : key}:${values[v]}`);
      }
      literal[c] = `{${fields.join(",")}}`;
    }
  }
  try {
    return new Function("L", "D", `"use strict";return ${literal[0]};`) as Compiled;
  } catch {
    return null; // code from strings forbidden (--disallow-code-generation-from-strings)
  }
}
