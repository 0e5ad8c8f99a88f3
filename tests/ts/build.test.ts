// The receiver's build of a moved result's containers (ts/thread/build.ts):
// a template compiled once into literals gives exactly what the generic
// loop gives (values, key order, prototypes, Map entries), keys that are
// no identifiers stay keys, and templates that literals cannot make (a
// container held twice, very deep ones) take the loop. No driver needed.
import { build, buildEach, compiledOf } from "../../ts/thread/build.ts";
import { checkedTemplate, DATA, LEAF } from "../../ts/thread/message.ts";
import { assert, assertEquals, assertSame, test } from "./harness.ts";

const ARRAY = 0, OBJECT = 1, MAP = 2, BARE = 3;

/** Builds `containers` both ways; returns the compiled result after checking it matches the loop's (`compiles`: whether literals can make it). */
function both(containers: unknown[][], leaves: unknown[], data: unknown[], compiles = true): unknown {
  const template = checkedTemplate(JSON.stringify(containers));
  assertSame(compiledOf(template) !== null, compiles, "compiled");
  const compiled = build(template, leaves, data);
  const generic = buildEach(template, leaves, data);
  assertSame(describe(compiled), describe(generic));
  return compiled;
}

/** Everything that tells two results apart: kinds, prototypes, own keys in order, values, which containers are one. */
function describe(value: unknown, seen: unknown[] = []): string {
  if (typeof value === "object" && value !== null && seen.includes(value)) return `#${seen.indexOf(value)}`;
  if (typeof value === "object" && value !== null) seen.push(value);
  const inner = (v: unknown) => describe(v, seen);
  if (value instanceof Map) return `Map{${[...value].map(([k, v]) => `${inner(k)}=>${inner(v)}`).join(",")}}`;
  if (Array.isArray(value)) return `[${value.map(inner).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const proto = Object.getPrototypeOf(value) === null ? "null" : Object.getPrototypeOf(value) === Object.prototype ? "Object" : "other";
    const keys = Reflect.ownKeys(value).map((k) => `${JSON.stringify(String(k))}:${inner(Object.getOwnPropertyDescriptor(value, k)!.value)}`);
    return `${proto}{${keys.join(",")}}`;
  }
  return JSON.stringify(value) ?? String(value);
}

test("build: nested arrays, objects, bare objects and Maps, as the loop builds them", () => {
  const leaves = ["l0", "l1", "l2", "l3", "l4"];
  const data = ["k1", 7, "k2", null, "d", "e", "x"];
  const result = both(
    [
      [ARRAY, 1, LEAF, 2, DATA],
      [OBJECT, "b", LEAF, "a", 3, "10", LEAF, "2", LEAF],
      [MAP, DATA, LEAF, DATA, DATA, DATA, DATA],
      [BARE, "x", DATA],
    ],
    leaves,
    data,
  ) as unknown[];
  assertEquals(result[1], "l0");
  assertEquals(result[3], "k1");
  const object = result[0] as Record<string, unknown>;
  assertEquals(Object.keys(object), ["2", "10", "b", "a"]); // integer keys first, as on the sender
  assertEquals([object.b, object["10"], object["2"]], ["l1", "l2", "l3"]);
  assertSame(Object.getPrototypeOf(object.a), null);
  assertEquals((object.a as Record<string, unknown>).x, "x");
  const map = result[2] as Map<unknown, unknown>;
  assertEquals([...map], [[7, "l4"], ["k2", null], ["d", "e"]]);
});

test("build: keys that are no identifiers, and __proto__, are own keys with the sender's text", () => {
  const keys = ["__proto__", 'quote"', "back\\slash", "line\u2028sep", "\u0000nul", "é", "constructor", "", "1e3", "-0"];
  const leaves = keys.map((_, i) => i);
  const result = both([[OBJECT, ...keys.flatMap((k) => [k, LEAF])]], leaves, []) as Record<string, unknown>;
  assertSame(Object.getPrototypeOf(result), Object.prototype);
  assertEquals(Object.getOwnPropertyDescriptor(result, "__proto__")?.value, 0);
  assertEquals(result['quote"'], 1);
  const bare = both([[BARE, ...keys.flatMap((k) => [k, DATA])]], [], keys.map((k) => `v${k}`)) as Record<string, unknown>;
  assertSame(Object.getPrototypeOf(bare), null);
  assertEquals(Object.getOwnPropertyDescriptor(bare, "__proto__")?.value, "v__proto__");
  assertEquals(bare["line\u2028sep"], "vline\u2028sep");
});

test("build: a container held twice is one object, as the loop makes it", () => {
  const result = both([[OBJECT, "a", 1, "b", 1], [ARRAY, LEAF]], ["x"], [], false) as Record<string, unknown>;
  assert(result.a === result.b, "one shared container");
  const cyclic = both([[OBJECT, "self", 0, "leaf", LEAF]], ["x"], [], false) as Record<string, unknown>;
  assert(cyclic.self === cyclic, "a container that holds itself");
});

test("build: a very deep template is built, and each result is new", () => {
  const depth = 500;
  const containers: unknown[][] = Array.from({ length: depth }, (_, c) => (c + 1 < depth ? [ARRAY, c + 1] : [ARRAY, LEAF]));
  let inner = both(containers, ["bottom"], [], false); // past the compiled depth
  assertSame(compiledOf(checkedTemplate(JSON.stringify(containers.slice(-40).map((c, i) => (i + 1 < 40 ? [ARRAY, i + 1] : c))))) !== null, true, "a shallower one compiles");
  for (let c = 0; c < depth; c++) inner = (inner as unknown[])[0];
  assertEquals(inner, "bottom");
  const template = checkedTemplate(JSON.stringify([[OBJECT, "a", 1], [ARRAY, LEAF]]));
  const first = build(template, [1], []) as { a: unknown[] };
  const second = build(template, [2], []) as { a: unknown[] };
  assert(first !== second && first.a !== second.a, "fresh containers for each build");
  assertEquals([first.a[0], second.a[0]], [1, 2]);
});

test("build: a container of very many values takes the loop (a literal that large overflows a stack), and is right", () => {
  const count = 800_000;
  const containers = [[ARRAY, ...Array.from({ length: count }, () => DATA)]];
  const data = Array.from({ length: count }, (_, i) => i);
  const result = both(containers, [], data, false) as number[];
  assertSame(result.length, count);
  assertSame(result[count - 1], count - 1);
  // Under the limit, the same shape compiles.
  assertSame(compiledOf(checkedTemplate(JSON.stringify([[ARRAY, ...Array.from({ length: 1000 }, () => DATA)]]))) !== null, true);
});

test("build: a realm whose JSON.stringify was replaced afterwards still builds what was sent", () => {
  const stringify = JSON.stringify;
  const template = checkedTemplate(stringify([[OBJECT, "replaced stringify", LEAF, "two", 1], [ARRAY, LEAF]]));
  JSON.stringify = () => {
    throw new Error("replaced");
  };
  try {
    assertSame(compiledOf(template) !== null, true, "compiled with the JSON.stringify the library found");
    const result = build(template, ["a", "b"], []) as Record<string, unknown>;
    assertEquals(result["replaced stringify"], "a");
    assertEquals(result.two, ["b"]);
  } finally {
    JSON.stringify = stringify;
  }
});

test("build: a compiler stopped by the realm's own code (Array.prototype.map replaced) leaves the loop to build", () => {
  const template = checkedTemplate(JSON.stringify([[OBJECT, "replaced map", LEAF, "two", 1], [ARRAY, LEAF]]));
  const map = Array.prototype.map;
  Array.prototype.map = () => {
    throw new Error("replaced");
  };
  try {
    const result = build(template, ["a", "b"], []) as Record<string, unknown>;
    assertEquals([result["replaced map"], (result.two as unknown[])[0]], ["a", "b"]);
  } finally {
    Array.prototype.map = map;
  }
  assertSame(compiledOf(template), null, "the loop, from now on");
});
