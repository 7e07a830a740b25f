import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { compiledStatement } from "../../src/store/postgres/compiled-statement.js";
import { knexOf } from "../../src/store/postgres/unit-of-work.js";
import { backend } from "../helpers/backend.js";
import { migratedStorageForSuite } from "../helpers/storage-database.js";

/**
 * A statement compiled once runs with each call's values as bindings (never the first call's),
 * on the pool and in a transaction, in the pool's schema; a parameter Knex would write into the
 * SQL text instead of binding it is refused when the statement compiles.
 */
describe(`compiledStatement (${backend})`, () => {
  const storage = migratedStorageForSuite();

  before(async () => {
    const db = knexOf(storage().uow.direct);
    await db("tmcs").insert(
      ["one", "two", "three"].map((name, i) => ({
        id: `00000000-0000-4000-8000-00000000000${i + 1}`,
        name: `compiled ${name}`,
        max_api_users: 5,
      })),
    );
  });

  // The stand-in of `from` must reach the bindings as it is: a statement that changed it (`${from}%`) is refused below.
  const names = compiledStatement((tx, from: string, limit: number, offset: number) =>
    knexOf(tx)("tmcs")
      .select("name")
      .where("name", "like", "compiled %")
      .andWhere("name", ">=", from)
      .orderBy("name")
      .limit(limit)
      .offset(offset),
  );

  test("each call's values are bound, on the pool and in a transaction", async () => {
    const { uow } = storage();
    const rows = async (tx = uow.direct, from = "compiled", limit = 10, offset = 0) =>
      (await names<{ name: string }>(tx, from, limit, offset)).map((r) => r.name);
    assert.deepEqual(await rows(), ["compiled one", "compiled three", "compiled two"]);
    assert.deepEqual(await rows(uow.direct, "compiled t", 1, 1), ["compiled two"]);
    assert.deepEqual(await rows(uow.direct, "compiled", 0, 0), []);
    assert.deepEqual(await rows(uow.direct, "z"), []);
    assert.deepEqual(await uow.transaction((tx) => rows(tx, "compiled th", 1)), ["compiled three"]);
  });

  test("a parameter that is not a binding is refused", async () => {
    const inlined = compiledStatement((tx, column: string) => knexOf(tx)("tmcs").select(column));
    await assert.rejects(inlined(storage().uow.direct, "name"), /parameter 0 is not a binding/);
  });
});
