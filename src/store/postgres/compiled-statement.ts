import type { Knex } from "knex";
import type { Tx } from "../../domain/shared/unit-of-work.js";
import { knexOf, schemaOf } from "./unit-of-work.js";

/** A value a compiled statement takes per call. */
type Param = string | number;

/**
 * A statement described with Knex's builder and compiled to SQL once per dialect and schema, then
 * run as raw SQL with each call's values. Knex builds and compiles a query's tree on every call
 * (its builder, formatter and lodash helpers were about a tenth of the authenticated read's
 * main-thread time in a `--cpu-prof` profile, for a statement whose text never changes); the
 * builder stays the one description of the statement, and its parameters stay bindings.
 *
 * `build` receives the handle and stand-ins for the parameters; every parameter must reach the
 * SQL as a binding (limit and offset do, as Knex binds them), never as text, which compiling
 * checks. Transactions share their pool's compiled text.
 */
export function compiledStatement<P extends readonly Param[]>(
  build: (tx: Tx, ...params: P) => Knex.QueryBuilder | Knex.Raw,
): <Row>(tx: Tx, ...params: P) => Promise<Row[]> {
  const compiled = new Map<string, { sql: string; slots: ReadonlyArray<number | { value: unknown }> }>();
  return async <Row>(tx: Tx, ...params: P): Promise<Row[]> => {
    const db = knexOf(tx);
    const key = `${(db.client as { dialect: string }).dialect}/${schemaOf(db) ?? ""}`;
    let statement = compiled.get(key);
    if (!statement) {
      statement = compile(tx, build, params);
      compiled.set(key, statement);
    }
    const bindings = statement.slots.map((slot) => (typeof slot === "number" ? params[slot] : slot.value));
    const result = (await db.raw(statement.sql, bindings as Knex.RawBinding[])) as { rows: Row[] };
    return result.rows;
  };
}

/** Stand-ins no real value equals: a marked string, or a number past any page size or offset. */
const standIn = (value: Param, i: number): Param =>
  typeof value === "string" ? `\u0000compiled-statement-parameter-${i}` : 2_000_000_000 + i;

function compile<P extends readonly Param[]>(
  tx: Tx,
  build: (tx: Tx, ...params: P) => Knex.QueryBuilder | Knex.Raw,
  params: P,
): { sql: string; slots: ReadonlyArray<number | { value: unknown }> } {
  const standIns = params.map(standIn) as unknown as P;
  const { sql, bindings } = build(tx, ...standIns).toSQL();
  const slots = bindings.map((value) => {
    const i = (standIns as readonly Param[]).indexOf(value as Param);
    return i >= 0 ? i : { value };
  });
  for (let i = 0; i < params.length; i++)
    if (!slots.includes(i)) throw new Error(`compiledStatement: parameter ${i} is not a binding of ${sql}`);
  return { sql, slots };
}
