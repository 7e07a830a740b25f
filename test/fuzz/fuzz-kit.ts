// Shared pieces of the property-based fuzz tests (test/fuzz/*.test.ts): run settings from the
// environment, string and JSON generators derived from the Protobuf descriptors of the contract,
// the ErrorResponse checks, the service environment, and the storage fingerprint behind
// "nothing written on refusal".
//
//   FUZZ_RUNS=N     cases per property. Default 100, what `npm test` runs: on the 2-core machine,
//                   under a foreign load of 9–14, rest-fuzz took 35–60 s per backend (20–25 s of
//                   CPU), rpc-fuzz ~45 s on Postgres, scim-envelope-fuzz (10 × FUZZ_RUNS cases,
//                   pure CPU) 10–15 s; a minute or less per file. scripts/fuzz.sh uses 5000.
//   FUZZ_SEED=S     replay a run: fast-check prints the seed (and path) of every failure; each file's
//                   suite title shows the seed its properties ran with (one seed per file and run)
//   FUZZ_PATH=P     with FUZZ_SEED, replay exactly the failing case (fast-check's "path"); the path
//                   belongs to one property, so pick it with --test-name-pattern, e.g.
//                   FUZZ_SEED=67761561 FUZZ_PATH=64:1:0:0:0 TEST_BACKEND=postgres \
//                     node --test --import tsx --test-name-pattern UpdateUser test/fuzz/rest-fuzz.test.ts
//                   The case is generated again exactly; the world it meets is new (fresh random
//                   ids, no API users from earlier properties), which is why every failure also
//                   prints the request as it was sent and the answer.
//   FUZZ_TIME_LIMIT_MS  longest time of one property, its shrinking included (default 10 minutes)
//   FUZZ_NO_SHRINK=1    report the first failing case as it is, without shrinking it
//   FUZZ_STRICT=1   the known src/ problems a file still tolerates (KNOWN_SRC_PROBLEMS, rpc-fuzz)
//                   fail its properties too; rest-fuzz and scim-envelope-fuzz tolerate none
//   FUZZ_FACES=a,b  rpc-fuzz only: the faces to use (connect-json, connect-binary, grpc-web, grpc-js, raw-connect, raw-grpc-web)
//   FUZZ_DEBUG=413  rest-fuzz only: print every request answered with that status
//   FUZZ_VERBOSE=1  print outcome counts per route / method (what the cases reached) and timings
import assert from "node:assert/strict";
import { ScalarType, type DescEnum, type DescField, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import fc from "fast-check";
import type { Knex } from "knex";
import { ROOMY_RATE_LIMITS } from "../helpers/token-kit.js";

// ---- settings --------------------------------------------------------------------------------

function positiveInt(raw: string | undefined, fallback: number): number {
  const value = raw === undefined || raw === "" ? NaN : Number(raw);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

export const FUZZ_RUNS = positiveInt(process.env.FUZZ_RUNS, 100);
export const FUZZ_STRICT = process.env.FUZZ_STRICT === "1";
/** Print what the cases reached (outcome counts per method, time per face) at the end of each file. */
export const FUZZ_VERBOSE = process.env.FUZZ_VERBOSE === "1";
/** One seed per process, so every property of a run can be replayed with FUZZ_SEED. */
export const FUZZ_SEED = seedFrom(process.env.FUZZ_SEED);

function seedFrom(raw: string | undefined): number {
  if (raw === undefined || raw === "") return (Date.now() ^ (process.pid << 8)) | 0;
  const seed = Number(raw);
  if (!Number.isInteger(seed))
    throw new Error(`FUZZ_SEED must be an integer (the seed a run printed), not ${JSON.stringify(raw)}`);
  return seed | 0;
}

/** fast-check parameters: the run's seed, `runs` cases, and the error of the counterexample in the report. */
export function fuzzParams<T>(runs = FUZZ_RUNS): fc.Parameters<T> {
  return {
    numRuns: runs,
    seed: FUZZ_SEED,
    ...(process.env.FUZZ_PATH ? { path: process.env.FUZZ_PATH } : {}),
    // A property, shrinking included, stops after this long (then it passes with the runs it made).
    interruptAfterTimeLimit: positiveInt(process.env.FUZZ_TIME_LIMIT_MS, 10 * 60_000),
    markInterruptAsFailure: false,
    includeErrorInReport: true,
    endOnFailure: process.env.FUZZ_NO_SHRINK === "1",
  };
}

/** A short, printable description of a value for assertion messages (long strings abbreviated). */
export function show(value: unknown, max = 600): string {
  let text: string;
  try {
    text = JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === "string" && v.length > 120) return `${v.slice(0, 60)}…(${v.length} chars)…${v.slice(-20)}`;
      if (v instanceof Uint8Array) return `<${v.length} bytes ${Buffer.from(v.subarray(0, 24)).toString("hex")}…>`;
      if (typeof v === "bigint") return `${v}n`;
      return v;
    });
  } catch {
    text = String(value);
  }
  text = text ?? String(value);
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

// ---- strings ---------------------------------------------------------------------------------

const C0_AND_DEL = [...Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)), "\u007f"];
export const controlChar = fc.constantFrom(...C0_AND_DEL);
export const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
/** Percent sequences, valid and not: what a URL decoder must survive. */
export const percentSequence = fc.constantFrom(
  "%",
  "%0",
  "%zz",
  "%00",
  "%25",
  "%2F",
  "%2f",
  "%5C",
  "%ED%A0%80",
  "%C0%80",
  "%FF",
  "%E2%82",
  "%u0041",
  "%%",
  "%20",
  "%0A",
  "%7F",
  "%F0%9F%98%80",
);
const specialText = fc.constantFrom(
  '"',
  "\\",
  "/",
  "?",
  "#",
  "&",
  "=",
  "+",
  " ",
  "\t",
  "\n",
  "\r",
  "\r\n",
  "'",
  ";",
  ",",
  ":",
  "*",
  "$",
  "`",
  "{",
  "}",
  "[",
  "]",
  "<",
  ">",
  "\u0085",
  "\u00a0",
  "\u2028",
  "\u2029",
  "\ufeff",
  "\ufffd",
  "\u200b",
  "\u202e",
  "é",
  "ß",
  "İ",
  "𝄞",
  "😀",
  "👩‍👩‍👧",
  "..",
  "../",
  "__proto__",
  "constructor",
  "prototype",
  "null",
  "undefined",
  "NaN",
  "-0",
  "1e309",
  "' OR '1'='1",
  "${x}",
  "%s",
  "%n",
);
/** One "unit" of a fuzz string: mostly plain text, sometimes what breaks parsers, logs and databases. */
export const fuzzUnit: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: controlChar },
  { weight: 2, arbitrary: loneSurrogate },
  { weight: 2, arbitrary: percentSequence },
  { weight: 3, arbitrary: specialText },
);

/** Lengths around the contract's limits (256, 1024, 2048, 16384), the body limit (65536) and beyond. */
export const LONG_LENGTHS = [
  200, 201, 255, 256, 257, 320, 321, 1024, 1025, 2048, 2049, 4096, 4097, 8193, 16384, 16385, 65_537,
] as const;

/** A long string: one filler character repeated, with one fuzz unit somewhere in it. */
export const longString: fc.Arbitrary<string> = fc
  .record({
    length: fc.constantFrom(...LONG_LENGTHS),
    filler: fc.constantFrom("x", "é", "😀", "%", "\u0000"),
    unit: fuzzUnit,
    at: fc.nat(),
  })
  .map(({ length, filler, unit, at }) => {
    const base = filler.repeat(Math.ceil(length / filler.length)).slice(0, length);
    const i = at % (base.length + 1);
    return base.slice(0, i) + unit + base.slice(i);
  });

export const shortFuzzString: fc.Arbitrary<string> = fc.string({ unit: fuzzUnit, maxLength: 24 });

/**
 * A value whose meaning is only known while the test runs (a clientId created a moment ago):
 * generated as an index, resolved right before the request is sent (`resolveRefs`).
 */
export class Ref {
  constructor(
    readonly pool: string,
    readonly index: number,
  ) {}
  toJSON(): string {
    return `<${this.pool}#${this.index}>`;
  }
  /** How fast-check prints it in a counterexample. */
  [fc.toStringMethod](): string {
    return `new Ref(${JSON.stringify(this.pool)}, ${this.index})`;
  }
}

/** Known strings of the test's world: static values and named dynamic pools. */
export interface StringPool {
  readonly constants: readonly string[];
  readonly dynamic: readonly string[];
}

/** Any string: plain, hostile, long, or one the service knows (ids, tokens, grant types). */
export function fuzzString(pool: StringPool): fc.Arbitrary<string | Ref> {
  const arbitraries: fc.WeightedArbitrary<string | Ref>[] = [
    { weight: 6, arbitrary: shortFuzzString },
    { weight: 1, arbitrary: longString },
    { weight: 2, arbitrary: fc.uuid() },
  ];
  if (pool.constants.length > 0) arbitraries.push({ weight: 4, arbitrary: fc.constantFrom(...pool.constants) });
  if (pool.constants.length > 0) {
    // A known value with a hostile unit in front, inside or behind it.
    arbitraries.push({
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom(...pool.constants), fuzzUnit, fc.nat()).map(([s, u, at]) => {
        const i = at % (s.length + 1);
        return s.slice(0, i) + u + s.slice(i);
      }),
    });
  }
  for (const name of pool.dynamic)
    arbitraries.push({ weight: 2, arbitrary: fc.nat(1000).map((i) => new Ref(name, i)) });
  return fc.oneof(...arbitraries);
}

/** Replaces every Ref in a generated value by its current value. */
export function resolveRefs<T>(value: T, resolve: (ref: Ref) => string): T {
  if (value instanceof Ref) return resolve(value) as T;
  if (Array.isArray(value)) return value.map((v) => resolveRefs(v, resolve)) as T;
  if (value !== null && typeof value === "object" && !(value instanceof Uint8Array)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = resolveRefs(v, resolve);
    return out as T;
  }
  return value;
}

// ---- JSON from descriptors -------------------------------------------------------------------

/** A generated value: JSON with Refs in it. */
type Gen = unknown;
type GenObject = Record<string, Gen>;

const INT32_EDGES = [0, -1, 1, 99, 100, 101, 999, 1000, 1001, 99_999, 100_000, 100_001, 2 ** 31 - 1, -(2 ** 31)];
const OUT_OF_RANGE_NUMBERS: JsonValue[] = [
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 32,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 63),
  1e21,
  1e300,
  -1e300,
  1.5,
  -0.5,
  5e-324,
  "1.5",
  "1e3",
  "0x10",
  " 1",
  "1 ",
  "",
  "+1",
  "-",
  "١٢",
  "Infinity",
  "NaN",
  "9223372036854775808",
];

/**
 * JSON for a message, with right-typed values (what protobuf JSON accepts: the contract's own
 * strings, int32 extremes, enum names and numbers, nested messages) and, per field, sometimes a
 * wrong one (arrays where objects go, objects where strings go, numbers out of range, garbage),
 * names in JSON or proto spelling, and unknown fields.
 */
export class JsonGen {
  private readonly memo = new Map<string, fc.Arbitrary<GenObject>>();
  constructor(
    private readonly strings: fc.Arbitrary<string | Ref>,
    private readonly options: { wrongTypes: boolean; unknownFields: boolean; maxDepth?: number } = {
      wrongTypes: true,
      unknownFields: true,
    },
  ) {}

  message(desc: DescMessage, depth = 0): fc.Arbitrary<GenObject> {
    const key = `${desc.typeName}@${depth}`;
    const cached = this.memo.get(key);
    if (cached) return cached;
    const maxDepth = this.options.maxDepth ?? 3;
    const model: Record<string, fc.Arbitrary<Gen>> = {};
    if (depth <= maxDepth) for (const field of desc.fields) model[field.jsonName] = this.field(field, depth);
    const protoNames = new Map(desc.fields.map((f) => [f.jsonName, f.name]));
    const arbitrary = fc
      .tuple(
        fc.record(model, { requiredKeys: [] }),
        fc.boolean(),
        this.options.unknownFields
          ? fc.option(fc.dictionary(shortFuzzString, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }), { freq: 6 })
          : fc.constant(null),
      )
      .map(([fields, useProtoNames, unknown]) => {
        const out: GenObject = {};
        for (const [name, value] of Object.entries(fields))
          out[useProtoNames ? (protoNames.get(name) ?? name) : name] = value as Gen;
        if (unknown) for (const [name, value] of Object.entries(unknown)) if (!protoNames.has(name)) out[name] = value;
        return out;
      });
    this.memo.set(key, arbitrary);
    return arbitrary;
  }

  /** A value for one top-level field (right-typed, or sometimes wrong when wrongTypes is on). */
  fieldValue(field: DescField): fc.Arbitrary<Gen> {
    let arbitrary = this.fieldMemo.get(field);
    if (!arbitrary) this.fieldMemo.set(field, (arbitrary = this.field(field, 0)));
    return arbitrary;
  }
  private readonly fieldMemo = new Map<DescField, fc.Arbitrary<Gen>>();

  private field(field: DescField, depth: number): fc.Arbitrary<Gen> {
    let right: fc.Arbitrary<Gen>;
    switch (field.fieldKind) {
      case "scalar":
        right = this.scalar(field.scalar);
        break;
      case "enum":
        right = this.enumValue(field.enum);
        break;
      case "message":
        right = this.nested(field.message, depth);
        break;
      case "list": {
        const item =
          field.listKind === "scalar"
            ? this.scalar(field.scalar)
            : field.listKind === "enum"
              ? this.enumValue(field.enum)
              : this.nested(field.message, depth);
        right = fc.array(item as fc.Arbitrary<Gen>, { maxLength: 4 });
        break;
      }
      case "map": {
        const value =
          field.mapKind === "scalar"
            ? this.scalar(field.scalar)
            : field.mapKind === "enum"
              ? this.enumValue(field.enum)
              : this.nested(field.message, depth);
        right = fc.dictionary(shortFuzzString, value as fc.Arbitrary<Gen>, { maxKeys: 3 }) as fc.Arbitrary<GenObject>;
        break;
      }
    }
    if (!this.options.wrongTypes) return right;
    return fc.oneof({ weight: 5, arbitrary: right }, { weight: 1, arbitrary: wrongJson });
  }

  private nested(desc: DescMessage, depth: number): fc.Arbitrary<Gen> {
    switch (desc.typeName) {
      // Deep nesting (past the gateway's limit and protobuf's) only where wrong values are wanted:
      // the service refuses it, and past protobuf JSON's limit a client cannot even build such a message.
      case "google.protobuf.Struct": {
        const struct = fc.dictionary(shortFuzzString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
        return this.options.wrongTypes
          ? fc.oneof(
              struct,
              deepJson.map((d) => ({ deep: d })),
            )
          : struct;
      }
      case "google.protobuf.Value":
        return this.options.wrongTypes
          ? fc.oneof(fc.jsonValue({ maxDepth: 2 }), deepJson)
          : fc.jsonValue({ maxDepth: 2 });
      case "google.protobuf.ListValue":
        return fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 });
      case "google.protobuf.Timestamp": {
        const date = fc
          .date({ noInvalidDate: true, min: new Date(0), max: new Date("9999-12-31T23:59:59Z") })
          .map((d) => d.toISOString());
        return this.options.wrongTypes ? fc.oneof(date, this.strings) : date;
      }
      default:
        return depth + 1 > (this.options.maxDepth ?? 3) ? fc.constant({}) : this.message(desc, depth + 1);
    }
  }

  private enumValue(desc: DescEnum): fc.Arbitrary<Gen> {
    const names = fc.constantFrom(...desc.values.map((v) => v.name));
    const choices: fc.WeightedArbitrary<Gen>[] = [
      { weight: 4, arbitrary: names },
      { weight: 1, arbitrary: fc.constantFrom(...desc.values.map((v) => v.number)) },
      // Numbers no value has: open enums keep them, buf.validate's defined_only must refuse them.
      { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) },
    ];
    // Names in the wrong case: protobuf JSON refuses them (so only where wrong values are wanted).
    if (this.options.wrongTypes) choices.push({ weight: 1, arbitrary: fc.mixedCase(names) });
    return fc.oneof(...choices);
  }

  scalar(type: ScalarType): fc.Arbitrary<Gen> {
    switch (type) {
      case ScalarType.STRING:
        return this.strings;
      case ScalarType.BOOL:
        return fc.boolean();
      case ScalarType.INT32:
      case ScalarType.SINT32:
      case ScalarType.SFIXED32:
        return fc.oneof(
          fc.constantFrom(...INT32_EDGES),
          fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
          fc.integer({ min: -5, max: 2000 }).map(String),
        );
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return fc.oneof(fc.constantFrom(0, 1, 2 ** 32 - 1), fc.integer({ min: 0, max: 2 ** 32 - 1 }));
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
        return fc.oneof(
          fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
          fc.integer({ min: -1000, max: 1000 }),
        );
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String), fc.nat(1000));
      case ScalarType.FLOAT:
      case ScalarType.DOUBLE:
        return fc.oneof(
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.constantFrom("NaN", "Infinity", "-Infinity", 0, -0, 90, -180, 3.4e38),
        );
      case ScalarType.BYTES:
        return fc.oneof(
          fc.base64String({ maxLength: 40 }),
          fc.uint8Array({ maxLength: 30 }).map((b) => Buffer.from(b).toString("base64url")),
        );
    }
  }
}

/**
 * Deep nesting: around the REST gateway's limit (MAX_JSON_DEPTH, 32 levels, counted from the
 * body), where protobuf binary stops (each JSON level of a Struct is two of its ~100 messages),
 * around protobuf JSON's limit of 100, and past all of them.
 */
export const deepJson: fc.Arbitrary<Gen> = fc
  .constantFrom(20, 29, 30, 31, 32, 33, 48, 50, 97, 99, 100, 101, 300)
  .chain((depth) =>
    fc.constantFrom("list", "object").map((kind) => {
      let value: Gen = kind === "list" ? [] : {};
      for (let i = 0; i < depth; i++) value = kind === "list" ? [value] : { a: value };
      return value;
    }),
  );

export const wrongJson: fc.Arbitrary<Gen> = fc.oneof<fc.WeightedArbitrary<Gen>[]>(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 2, arbitrary: fc.constantFrom(...OUT_OF_RANGE_NUMBERS) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<JsonValue>(
      null,
      [],
      {},
      [null],
      [{}],
      true,
      false,
      0,
      "",
      [""],
      { "": "" },
      JSON.parse('{"__proto__": {"polluted": 1}}') as JsonValue,
    ),
  },
  { weight: 1, arbitrary: fc.array(fc.jsonValue({ maxDepth: 1 }), { minLength: 1, maxLength: 4 }) },
  { weight: 1, arbitrary: deepJson },
);

// ---- the answers -------------------------------------------------------------------------------

export interface ErrorBody {
  debugIdentifier?: unknown;
  errorMessages?: Array<{ errorCode?: unknown; message?: unknown }>;
}

/** The REST ErrorResponse: JSON with a debugIdentifier (= x-request-id) and errorMessages[0].errorCode. */
export function assertRestErrorResponse(
  response: { statusCode: number; headers: Record<string, unknown>; body: string },
  context: () => string,
): ErrorBody {
  let body: ErrorBody;
  try {
    body = JSON.parse(response.body) as ErrorBody;
  } catch {
    assert.fail(`${response.statusCode} without a JSON ErrorResponse body: ${show(response.body)} ${context()}`);
  }
  // application/scim+json on the SCIM routes (their error dialect), application/json everywhere else.
  assert.match(
    String(response.headers["content-type"]),
    /^application\/(scim\+)?json/,
    `${response.statusCode} content type ${context()}`,
  );
  assert.ok(
    typeof body.debugIdentifier === "string" && body.debugIdentifier.length > 0,
    `${response.statusCode} without debugIdentifier: ${show(body)} ${context()}`,
  );
  assert.equal(
    body.debugIdentifier,
    response.headers["x-request-id"],
    `debugIdentifier is the request id ${context()}`,
  );
  const first = Array.isArray(body.errorMessages) ? body.errorMessages[0] : undefined;
  assert.ok(
    first && typeof first.errorCode === "string" && first.errorCode.length > 0,
    `${response.statusCode} without errorMessages[0].errorCode: ${show(body)} ${context()}`,
  );
  assert.equal(typeof first.message, "string", `errorMessages[0].message ${context()}`);
  return body;
}

// ---- the fuzzed service, and "nothing written on refusal" ------------------------------------------

/**
 * The environment of a fuzzed service: budgets no fuzz run exhausts, and timeouts no slow
 * machine reaches. A request the service answers with 503 or 504 because a query waited over a
 * second behind another test file's work would be a 5xx that says nothing about the input, so
 * the properties would depend on timing; here only the input decides the answer.
 */
export const FUZZ_SERVICE_ENV: Readonly<Record<string, string>> = {
  ...ROOMY_RATE_LIMITS,
  REQUEST_DEADLINE_MS: "120000",
  DATABASE_QUERY_TIMEOUT_MS: "60000",
  DATABASE_ACQUIRE_TIMEOUT_MS: "60000",
  REDIS_COMMAND_TIMEOUT_MS: "30000",
  // Access logs of thousands of requests would only fill memory; warnings and errors are kept.
  LOG_LEVEL: "warn",
};

const fingerprintQueries = new WeakMap<Knex, Promise<string>>();

/**
 * One query over every table of the schema (found in the catalogue, so a new table is covered
 * without a line here), each as its row count and an MD5 of all its rows as text: any insert,
 * update or delete changes it. Two tables change on their own, so they are read as what a
 * request could change: audit_events without the token endpoint's events (TOKEN_*, recorded off
 * the request path, a refusal's included — they are the audit trail of refusals), and
 * credential_changes as its highest number (a background job prunes old changes; a new change
 * always gets a higher number). One write on refusal is by design and unreachable here: a
 * replayed refresh token revokes its family (RFC 9700), and the fuzzers hold no refresh tokens.
 */
async function fingerprintQuery(db: Knex): Promise<string> {
  const result = await db.raw(
    "select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name",
  );
  const rows = ((result as { rows?: Array<{ table_name: string }> }).rows ??
    (result as Array<{ table_name: string }>)) as Array<{ table_name: string }>;
  // audit_events' monthly partitions are read through it (the parent's scan covers their rows);
  // api_user_token_activity is raised only by the audit flush of TOKEN_ISSUED events, off the request path.
  const tables = rows
    .map((r) => r.table_name)
    .filter(
      (name) =>
        !name.startsWith("knex_migrations") && !name.startsWith("audit_events_") && name !== "api_user_token_activity",
    );
  assert.ok(
    tables.includes("api_users") && tables.includes("audit_events"),
    `storageFingerprint found the schema's tables: ${tables.join(", ")}`,
  );
  const column = (name: string) => {
    const quoted = `"${name.replace(/"/g, '""')}"`;
    if (name === "credential_changes")
      return `(select 'max:' || coalesce(max(seq), 0) from credential_changes) as ${quoted}`;
    const where = name === "audit_events" ? " where left(t.action, 6) <> 'TOKEN_'" : "";
    // No ORDER BY (sorting every row's text doubles the cost on PGlite): a table's scan order
    // changes only when its rows do (nothing here runs VACUUM FULL or CLUSTER).
    return `(select count(*) || ':' || coalesce(md5(string_agg(t::text, '|')), '-') from ${quoted} t${where}) as ${quoted}`;
  };
  return `select ${tables.map(column).join(",\n  ")}`;
}

/**
 * Everything a request could write, in one query: `table=count:md5` per table (see
 * fingerprintQuery). Equal before and after a refused request means it wrote nothing.
 */
export async function storageFingerprint(db: Knex): Promise<string> {
  let query = fingerprintQueries.get(db);
  if (!query) fingerprintQueries.set(db, (query = fingerprintQuery(db)));
  const result = await db.raw(await query);
  const row = ((result as { rows?: Record<string, unknown>[] }).rows ?? (result as Record<string, unknown>[]))[0] ?? {};
  return Object.entries(row)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(" ");
}

/** The tables whose part of two fingerprints differs, for an assertion message. */
export function fingerprintDiff(before: string, after: string): string {
  const parse = (f: string) => new Map(f.split(" ").map((part) => part.split("=") as [string, string]));
  const a = parse(before);
  const b = parse(after);
  const changed = [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k) !== b.get(k));
  return changed.length === 0
    ? "(no difference)"
    : changed.map((k) => `${k}: ${a.get(k) ?? "?"} → ${b.get(k) ?? "?"}`).join("; ");
}

/** Counts of outcomes per label, printed at the end of a file so a run shows what it reached. */
export class Tally {
  private readonly counts = new Map<string, Map<string, number>>();
  add(label: string, outcome: string): void {
    let m = this.counts.get(label);
    if (!m) this.counts.set(label, (m = new Map()));
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
  }
  lines(): string[] {
    return [...this.counts].map(
      ([label, m]) =>
        `${label}: ${[...m]
          .sort((a, b) => b[1] - a[1])
          .map(([o, n]) => `${o}×${n}`)
          .join(" ")}`,
    );
  }
}

export type { GenObject };

// ---- URL and form encoding -------------------------------------------------------------------

/**
 * Percent-encodes every character not matched by `keep`, as UTF-8; a lone surrogate becomes the
 * bytes UTF-8 would give it if it could (ED A0 80 …): not valid UTF-8, which is the point.
 * (encodeURIComponent throws on lone surrogates instead.)
 */
export function percentEncode(text: string, keep: RegExp = /[A-Za-z0-9\-._~]/): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    let bytes: number[];
    if (
      unit >= 0xd800 &&
      unit <= 0xdbff &&
      i + 1 < text.length &&
      text.charCodeAt(i + 1) >= 0xdc00 &&
      text.charCodeAt(i + 1) <= 0xdfff
    ) {
      bytes = [...Buffer.from(text.slice(i, i + 2), "utf8")];
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      bytes = [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)];
    } else if (keep.test(text[i]!)) {
      out += text[i];
      continue;
    } else {
      bytes = [...Buffer.from(text[i]!, "utf8")];
    }
    for (const b of bytes) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * Printable ASCII as it is (so `%zz`, `%` and `%ED%A0%80` reach the decoder), the rest percent-encoded;
 * also `#` (it would end the URL) and `\` (light-my-request's WHATWG URL parsing turns it into `/`).
 */
export function hostileEncode(text: string): string {
  return percentEncode(text, /[\x21-\x22\x24-\x5b\x5d-\x7e]/);
}

// ---- requests that succeed, to mutate ------------------------------------------------------------

export interface WorldIds {
  readonly adminClientId: string;
  readonly adminClientSecret: string;
  readonly adminToken: string;
  /** A resource server and a token for its audience, where the world has one. */
  readonly resourceServer?: { readonly clientId: string; readonly clientSecret: string; readonly token: string };
  readonly tmcId: string;
  readonly orgId: string;
  readonly userIds: readonly string[];
}

/**
 * Request messages (protobuf JSON) that a method accepts in this world, so that one mutation away
 * from them the fuzzer reaches the handler and the domain rather than stopping at validation.
 * Rotate and revoke name an API user the fuzzer created (a Ref), never the admin.
 */
export function validRequests(method: { parent: { typeName: string }; name: string }, w: WorldIds): GenObject[] {
  const key = `${method.parent.typeName}/${method.name}`;
  const exchange = "urn:ietf:params:oauth:grant-type:token-exchange";
  const accessTokenType = "urn:ietf:params:oauth:token-type:access_token";
  switch (key) {
    case "travel.auth.v2.AuthService/FetchOauth2Token":
      return [
        { grant_type: "client_credentials", client_id: w.adminClientId, client_secret: w.adminClientSecret },
        {
          grant_type: "client_credentials",
          client_id: w.adminClientId,
          client_secret: w.adminClientSecret,
          scope: "api-users openid",
        },
        {
          grant_type: exchange,
          client_id: w.adminClientId,
          client_secret: w.adminClientSecret,
          subject_token: w.adminToken,
          subject_token_type: accessTokenType,
        },
      ];
    case "travel.auth.v2.AuthService/IntrospectToken":
      return [{ token: w.adminToken, client_id: w.adminClientId, client_secret: w.adminClientSecret }];
    case "travel.auth.v2.AuthService/IntrospectTokens": {
      const rs = w.resourceServer;
      return rs
        ? [
            { tokens: [rs.token], client_id: rs.clientId, client_secret: rs.clientSecret },
            { tokens: [rs.token, w.adminToken, "junk"], client_id: rs.clientId, client_secret: rs.clientSecret },
          ]
        : [];
    }
    case "travel.auth.v2.AuthService/PollSecurityEvents": {
      // returnImmediately and maxEvents 0 both answer at once: one mutation leaves one of them, so
      // no drawn request long-polls.
      const rs = w.resourceServer;
      const as = rs ? { client_id: rs.clientId, client_secret: rs.clientSecret } : {};
      return [
        { returnImmediately: true, maxEvents: 0, ack: ["1"], ...as },
        {
          returnImmediately: true,
          maxEvents: 0,
          setErrs: { "2": { err: "invalid_request", description: "x" } },
          ...as,
        },
      ];
    }
    case "travel.auth.v2.AuthService/GetAuthToken":
      return [{ clientId: w.adminClientId, clientSecret: w.adminClientSecret }];
    case "travel.apiuser.v2.ApiUserService/CreateApiUser":
      return [{}, { credentialType: "SCIM_TOKEN" }, { role: "COMPANY_ADMIN", orgId: w.orgId }, { tmcId: w.tmcId }];
    case "travel.apiuser.v2.ApiUserService/GetApiUsers":
      return [{ limit: 10, offset: 0 }, {}];
    case "travel.apiuser.v2.ApiUserService/DeleteApiUser":
    case "travel.apiuser.v2.ApiUserService/RotateClientSecret":
      return [
        { clientId: new Ref("created", 0) as never },
        { clientId: new Ref("created", 1) as never },
        { clientId: new Ref("revoked", 0) as never },
      ];
    case "travel.user.v2.UserService/GetUser":
      return [{ userId: w.userIds[0] ?? "" }];
    case "travel.user.v2.UserService/UpdateUser":
      return [
        {
          userId: w.userIds[0] ?? "",
          persona: "EMPLOYEE",
          businessInfo: { legalEntityRef: { id: w.orgId }, organizationRef: { id: w.orgId } },
          personalInfo: { email: "a@b.example" },
          travelPreferences: { preferences: { air: { seat: "AISLE" } } },
        },
      ];
    case "travel.aircredit.v3.AirCreditService/ListCompanyTransferableUnusedCredits":
      return [{ companyId: { id: w.orgId } }];
    case "travel.aircredit.v3.AirCreditService/MigrateCompanyCredits":
      return [{ paymentSourceIds: [w.orgId] }];
    case "travel.operator.v1.OperatorService/CreateTmc":
      return [{ name: "Fuzz TMC", maxApiUsers: 3 }];
    case "travel.operator.v1.OperatorService/SetTmcApiUserLimit":
      return [{ tmcId: w.tmcId, maxApiUsers: 8 }];
    case "travel.operator.v1.OperatorService/CreateCompany":
      return [{ tmcId: w.tmcId, name: "Fuzz Company" }];
    case "travel.operator.v1.OperatorService/CreateUser":
      return [{ orgId: w.orgId, email: "fuzz@example.com", givenName: "Fuzz", familyName: "Case" }];
    case "travel.operator.v1.OperatorService/CreateApiUser":
      return [{ tmcId: w.tmcId }, { tmcId: w.tmcId, credentialType: "SCIM_TOKEN" }];
    case "travel.operator.v1.OperatorService/AddTrustedIssuer":
      return [
        { tmcId: w.tmcId, issuer: "https://issuer.example", jwks: '{"keys":[]}' },
        { tmcId: w.tmcId, issuer: "https://issuer.example", jwksUri: "https://issuer.example/jwks.json" },
      ];
    case "travel.operator.v1.OperatorService/ListAuditEvents":
      return [{ tmcId: w.tmcId, limit: 5 }];
    case "travel.operator.v1.OperatorService/CreateResourceServer":
      // The first registers its audiences; the same request again is the 409 of an audience taken.
      return [
        { name: "Fuzz resource server", audiences: ["https://fuzz.example/api"] },
        { name: "Fuzz resource server", audiences: ["urn:fuzz:a", "https://fuzz.example/b?x=1"] },
        { name: "Fuzz keyed server", audiences: ["urn:fuzz:keys"], jwks: '{"keys":[{"kty":"OKP","crv":"Ed25519"}]}' },
      ];
    case "travel.operator.v1.OperatorService/SetResourceServerKeys":
      return [
        { clientId: "rs-nobody", jwks: '{"keys":[]}' },
        { clientId: w.adminClientId, jwks: "not json" },
      ];
    case "travel.operator.v1.OperatorService/ListResourceServers":
      return [{ limit: 10, offset: 0 }, {}];
    case "travel.operator.v1.OperatorService/GetResourceServer":
    case "travel.operator.v1.OperatorService/RotateResourceServerSecret":
    case "travel.operator.v1.OperatorService/RemoveResourceServer":
      return [{ clientId: "rs-nobody" }, { clientId: w.adminClientId }];
    case "travel.operator.v1.OperatorService/GetTokenLockout":
    case "travel.operator.v1.OperatorService/ResetTokenLockout":
      return [{ address: "127.0.0.1" }, { address: "::1", clientId: w.adminClientId }];
    default:
      return [{}];
  }
}

/** A valid request with at most one change: a field set to a generated value, a field dropped, or an unknown field added. */
export function nearValid(desc: DescMessage, valid: readonly GenObject[], gen: JsonGen): fc.Arbitrary<GenObject> {
  const fields = desc.fields;
  const set =
    fields.length === 0
      ? fc.constant(null)
      : fc
          .constantFrom(...fields)
          .chain((field) => gen.fieldValue(field).map((value) => ({ name: field.jsonName, value })));
  return fc
    .record({
      base: fc.constantFrom(...valid),
      change: fc.oneof(
        { weight: 2, arbitrary: fc.constant({ op: "none" as const }) },
        { weight: 5, arbitrary: set.map((s) => (s ? { op: "set" as const, ...s } : { op: "none" as const })) },
        { weight: 1, arbitrary: fc.nat().map((i) => ({ op: "drop" as const, i })) },
        {
          weight: 1,
          arbitrary: fc
            .tuple(shortFuzzString, fc.jsonValue({ maxDepth: 1 }))
            .map(([name, value]) => ({ op: "add" as const, name: `x${name}`, value })),
        },
      ),
    })
    .map(({ base, change }) => {
      const out: GenObject = { ...base };
      if (change.op === "set") out[change.name] = change.value;
      if (change.op === "drop") {
        const keys = Object.keys(out);
        if (keys.length > 0) delete out[keys[change.i % keys.length]!];
      }
      if (change.op === "add") out[change.name] = change.value;
      return out;
    });
}
