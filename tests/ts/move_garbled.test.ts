// Garbled messages: wrong types, truncated arrays, bad JSON, codes out of
// range, containers no one holds, Proxies and shadowed lengths: each an
// MtcError (never a SyntaxError, a TypeError or silent garbage), nothing
// taken; dropMoved, dropMovedFrom and ownerAlive check their arguments.
// Emulated driver.
import { disposeAll, dropMoved, dropMovedFrom, type Moved, MtcError, moveResult, ownerAlive, startCopy, takeResult, Tensor, threadOwner } from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { F, FIELDS } from "../../ts/thread/message.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const garbledTest = (name: string, fn: () => void | Promise<void>) => test(`move, garbled: ${name}`, fn, { skip: skipWithoutDriver });

const parcels = () => library().symbols.mtc_parcels_live!();

/** `fn` throws MtcError with `code` (and a message including `includes`), taking no parcel. */
function refused(fn: () => unknown, includes = "", code = "MTC_ERR_INVALID_ARGUMENT"): MtcError {
  const before = parcels();
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.code, code, e.message);
  assertSame(parcels(), before, `no parcel taken: ${e.message}`);
  return e;
}

type Fields = Record<string, unknown>;

/** A message with a DeviceTensor, a pageable Tensor, a Map and plain data in it. */
async function sample(): Promise<Moved> {
  const onGpu = await startCopy({ x: new Float32Array([1, 2]) }, "cuda:0");
  return moveResult({ x: onGpu.x, t: new Tensor(new Int16Array([1, 2, 3, 4]), [2, 2]), m: new Map([["k", [1, "two"]]]), n: 3 });
}

/** `m` with `fields` replaced. */
const withFields = (m: Moved, fields: Fields) => ({ ...m, ...fields }) as Moved;

garbledTest("fields of the wrong type, each an MtcError", async () => {
  const m = await sample();
  for (const x of [null, undefined, 1, "mtc.moved", [], {}, { mtc: "other" }]) refused(() => takeResult(x as Moved), "not a message of moveResult");
  const cases: [Fields, string][] = [
    [{ parcel: undefined }, "its parcel is undefined"],
    [{ parcel: -1 }, "its parcel is -1"],
    [{ parcel: 1.5 }, "its parcel is 1.5"],
    [{ parcel: "12" }, "its parcel is \"12\""],
    [{ parcel: NaN }, "its parcel is NaN"],
    [{ parcel: 2 ** 60 }, "not an id"],
    [{ parcel: 12n }, "its parcel is 12n"],
    [{ root: 5 }, "its root is 5"],
    [{ root: "0" }, "its root is \"0\""],
    [{ template: 42 }, "its template is not a string"],
    [{ template: undefined }, "its template is not a string"],
    [{ nums: [1, 2, 3] }, "not Float64Arrays"],
    [{ nums: new Float32Array(FIELDS * 2) }, "not Float64Arrays"],
    [{ dims: undefined }, "not Float64Arrays"],
    [{ data: "abc" }, "its data is not an array"],
    [{ data: undefined }, "its data is not an array"],
    [{ extras: 7 }, "its extras are neither null nor an array"],
    [{ error: 5 }, "its error is 5"],
    [{ error: { name: 1, message: "m" } }, "no name and message"],
    [{ error: { name: "E", message: "m", status: "3" } }, "status \"3\""],
    [{ error: { name: "E", message: "m", stack: 7 } }, "not a string"],
  ];
  for (const [fields, includes] of cases) refused(() => takeResult(withFields(m, fields)), includes);
  disposeAll(takeResult(m));
});

garbledTest("templates: bad JSON, wrong shapes, codes out of range, containers no one holds", async () => {
  const m = await sample();
  const templates: [string, string][] = [
    ["", "is not JSON"],
    ["[[1,", "is not JSON"],
    ["{\"a\": 1}", "is not an array"],
    ["[7]", "container 0 that is not"],
    ["[[]]", "container 0 that is not"],
    ["[[9, -1]]", "of kind 9"],
    ["[[\"0\"]]", "of kind \"0\""],
    ["[[0, -3]]", "code -3"],
    ["[[0, 1.5]]", "code 1.5"],
    ["[[0, \"1\"]]", "code \"1\""],
    ["[[0, 5]]", "code 5"],
    ["[[0, null]]", "code null"],
    ["[[1, \"a\"]]", "a key and no value"],
    ["[[1, 7, -1]]", "key 7"],
    ["[[1, \"a\", -1, \"a\", -2]]", "key \"a\""],
    ["[[2, -1, -1]]", "key -1"],
    ["[[0, 2], [0], [0]]", "code 2"], // skips container 1
    ["[[0], [0, 1]]", "container 1 that no container before it holds"], // a cycle no one reaches
    ["[[0, 1], [0, 2], [0, 1]]", "template holds"], // a cycle below the root: well formed, but it holds no leaf of the message
  ];
  for (const [template, includes] of templates) refused(() => takeResult(withFields(m, { template })), includes);
  disposeAll(takeResult(m));
});

garbledTest("counts that do not match: truncated or longer nums, dims, data and extras", async () => {
  const m = await sample();
  const nums = m.nums!, dims = m.dims!;
  const cases: [Fields, string][] = [
    [{ nums: nums.subarray(0, nums.length - 1) }, "numbers"],
    [{ nums: new Float64Array(0) }, "numbers"],
    [{ nums: Float64Array.of(...nums, ...nums.subarray(0, FIELDS)) }, "numbers"],
    [{ dims: dims.subarray(0, dims.length - 1) }, "dims"],
    [{ dims: Float64Array.of(...dims, 1) }, "dims has"],
    [{ data: m.data!.slice(1) }, "its data has"],
    [{ data: [...m.data!, 1] }, "its data has"],
    [{ extras: [] }, "extras"],
    [{ extras: [null, null, null] }, "extras"],
    [{ root: -1 }, "does not match its template"],
    [{ root: -2, template: "[]", nums: new Float64Array(0), dims: new Float64Array(0), extras: null }, "values but its data has"],
  ];
  for (const [fields, includes] of cases) refused(() => takeResult(withFields(m, fields)), includes);
  // A pageable Tensor's extra: not an object, strides not an array, elements not a typed array, a shape they do not fill.
  const extras = m.extras!;
  const t = extras.findIndex((e) => e !== null);
  const withExtra = (extra: unknown) => withFields(m, { extras: extras.map((e, i) => (i === t ? extra : e)) });
  refused(() => takeResult(withExtra(null)), "its extra is null", "MTC_ERR_INVALID_ARGUMENT");
  refused(() => takeResult(withExtra({ data: new Int16Array(4), strides: "1,2", offset: 0 })), "strides");
  refused(() => takeResult(withExtra({ data: [1, 2, 3, 4], offset: 0 })), "not a typed array");
  refused(() => takeResult(withExtra({ data: new Int16Array(3), offset: 0 })), "has 3");
  refused(() => takeResult(withExtra({ data: new Int16Array(4), offset: -1 })), "offset");
  refused(() => takeResult(withExtra({ data: new Int16Array(4), strides: [9, 9], offset: 0 })), "outside");
  const e = refused(() => takeResult(withExtra({ data: new Float64Array(4), offset: 0 })), "cannot store");
  assertSame(e.path, ".t");
  disposeAll(takeResult(m));
});

garbledTest("rows: every field that is no integer in range", async () => {
  const m = await sample();
  const x = 0; // the DeviceTensor's row
  for (const [field, value, includes] of [
    [0, 7, "leaf kind is 7"],
    [0, NaN, "leaf kind is NaN"],
    [5, -1, "dtype code is -1"],
    [5, 15, "dtype code is 15"],
    [5, 1.5, "dtype code is 1.5"],
    [6, -1, "flags"],
    [7, Infinity, "dimensions"],
    [1, Infinity, "no index"],
    [3, 2.5, "no index"],
    [4, -0.5, "no index"],
  ] as const) {
    const nums = m.nums!.slice();
    nums[x * FIELDS + field] = value;
    const e = refused(() => takeResult(withFields(m, { nums })), includes);
    assertSame(e.path, ".x", e.message);
  }
  disposeAll(takeResult(m));
});

garbledTest("Proxies and own properties: each field read once, lengths as the engine keeps them", async () => {
  const m = await sample();
  // A Proxy where an array must be: refused, its traps run at most once each.
  let traps = 0;
  const nums = new Proxy(m.nums!, { get: (t, k) => (traps++, Reflect.get(t, k)) });
  refused(() => takeResult(withFields(m, { nums })), "not Float64Arrays");
  assertSame(traps, 0, "a Proxy of a typed array is no typed array, and none of its traps ran");
  // An own length on the rows changes nothing.
  const longer = m.nums!.slice();
  Object.defineProperty(longer, "length", { value: 999 });
  const data = new Proxy([...m.data!], {});
  const got = takeResult(withFields(m, { nums: longer, data })) as { x: { toHost(): Float32Array }; n: number; m: Map<string, unknown> };
  assertEquals(Array.from(got.x.toHost()), [1, 2]);
  assertSame(got.n, 3);
  assertEquals(got.m.get("k"), [1, "two"]);
  disposeAll(got);
  // A message that holds itself: its data may (data is cloned as it is), its other fields may not.
  const cyclic = moveResult({ n: 1 }) as Moved & { data: unknown[] };
  refused(() => takeResult(withFields(cyclic, { nums: cyclic })), "not Float64Arrays");
  refused(() => takeResult(withFields(cyclic, { template: cyclic })), "not a string");
  cyclic.data.push(cyclic);
  refused(() => takeResult(cyclic), "its data has 2");
  cyclic.data.pop();
  assertEquals(takeResult(cyclic), { n: 1 });
});

garbledTest("user code run while a message is read (a getter in an extra) edits the message: nothing it changes is used", async () => {
  const m = await sample();
  const t = m.extras!.findIndex((e) => e !== null);
  const extra = m.extras![t]!;
  const nums = m.nums!, dims = m.dims!, data = m.data!;
  let ran = 0;
  const sneaky = {
    get data() {
      ran++;
      nums[F.offset] = 2 ** 40; // the DeviceTensor's offset, after its row was checked
      dims[0] = 1 << 30;
      data.length = 0;
      return extra.data;
    },
    strides: undefined,
    offset: 0,
  };
  const got = takeResult(withFields(m, { extras: m.extras!.map((e, i) => (i === t ? sneaky : e)) })) as { x: { toHost(): Float32Array }; n: number };
  assertSame(ran, 1, "the getter ran once");
  assertEquals(Array.from(got.x.toHost()), [1, 2], "the rows as they were read");
  assertSame(got.n, 3, "the data as it was read");
  disposeAll(got);
});

garbledTest("a sparse data array of 2^31 elements is refused at once", async () => {
  const m = await sample();
  const sparse: unknown[] = [];
  sparse.length = 2 ** 31;
  refused(() => takeResult(withFields(m, { data: sparse })), "its data has 2147483648");
  disposeAll(takeResult(m));
});

garbledTest("a cyclic result round-trips as a cycle", () => {
  const a: unknown[] = [1];
  a.push(a);
  const b = { a, self: null as unknown };
  b.self = b;
  const got = takeResult(moveResult(b)) as typeof b;
  assertSame(got.self, got);
  assertSame((got.a as unknown[])[1], got.a);
  assertSame((got.a as unknown[])[0], 1);
});

garbledTest("dropMoved, dropMovedFrom and ownerAlive: anything but an id is an MtcError", () => {
  for (const x of [null, 1, "x", {}, { mtc: "mtc.moved", parcel: "3" }, { mtc: "mtc.moved", parcel: -2 }, { mtc: "mtc.moved", parcel: 0.5 }]) {
    refused(() => dropMoved(x as Moved));
  }
  const before = parcels();
  dropMoved({ mtc: "mtc.moved", parcel: 0, sender: 0 }); // a message with no parcel: nothing to give back
  assertSame(parcels(), before);
  for (const x of [1.5, "1", undefined, null, NaN, -1, 0, 2 ** 53, {}, 1n]) {
    const e = refused(() => dropMovedFrom(x as number), "is no owner id");
    assert(e.message.startsWith("dropMovedFrom: "), e.message);
  }
  for (const x of [1.5, "1", undefined, null, NaN, -1, 2 ** 53, 1n]) refused(() => ownerAlive(x as number), "is no owner id");
  assertSame(ownerAlive(0), false);
  assertSame(ownerAlive(threadOwner()), true);
  assertSame(dropMovedFrom(threadOwner()), 0);
});

garbledTest("a field whose getter throws (the message's, an extra's, an error's): an MtcError saying the message could not be read, nothing taken", async () => {
  const m = await sample();
  const throwing = (field: string) => ({ get: () => { throw new RangeError(`no ${field}`); } });
  for (const field of ["mtc", "parcel", "root", "template", "nums", "dims", "data", "extras"]) {
    const e = refused(() => takeResult(Object.defineProperty({ ...m }, field, throwing(field)) as Moved), "the message could not be read");
    assert(e.message.includes(`RangeError: no ${field}`), e.message);
  }
  const t = m.extras!.findIndex((e) => e !== null);
  const extras = m.extras!.map((e, i) => (i === t ? Object.defineProperty({ ...e }, "data", throwing("data")) : e));
  refused(() => takeResult(withFields(m, { extras })), "RangeError: no data");
  const data = Object.defineProperty([...m.data!], 0, throwing("value"));
  refused(() => takeResult(withFields(m, { data })), "RangeError: no value");
  const error = moveResult(new Error("sent"));
  refused(() => takeResult(withFields(error, { error: Object.defineProperty({ ...error.error }, "message", throwing("message")) })), "RangeError: no message");
  // Something thrown that is no Error, and dropMoved likewise.
  refused(() => takeResult(Object.defineProperty({ ...m }, "parcel", { get: () => { throw 7; } }) as Moved), "threw 7");
  assertThrows(() => dropMoved(Object.defineProperty({ ...m }, "parcel", throwing("parcel")) as Moved), MtcError, "dropMoved: the message could not be read");
  disposeAll(takeResult(m)); // as sent: taken
  dropMoved(error);
});
