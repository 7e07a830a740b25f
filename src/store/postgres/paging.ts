import type { Knex } from "knex";
import { toCount } from "./tables.js";

/** The column of the joined statement that carries the total; no listed table has a column of that name. */
const TOTAL = "page_total";

/**
 * A page of rows and the number of rows the whole match has, in one statement (one round trip):
 *
 *   select page.*, total.page_total from (select count(*) …) as total
 *     left join (select … order by … limit … offset …) as page on true order by page.…
 *
 * The count is the outer side of a left join, so the statement always answers at least one row:
 * a page past the last match (or a page of 0 rows) comes back as one row of nulls, which carries
 * the total and is dropped here. A window count (`count(*) over ()` in the page query) would have
 * no row to ride on then, and makes Postgres read and buffer every matching row; this count runs
 * on its own (an index-only count where the match allows one). Same SQL on Postgres and PGlite.
 *
 * `count`: the match, with no select (the count is put on it). `page`: the page's columns, order,
 * limit and offset. `order`: the page's order again, as SQL over the alias `page` (the outer
 * query's order is the one the answer keeps). `present`: a column never null in a real row.
 * A real row keeps the extra column; the mappers read named columns.
 */
export async function pageWithTotal<Row>(db: Knex, parts: PageParts<Row>): Promise<{ rows: Row[]; total: number }> {
  return pageOf(parts, (await pageWithTotalQuery(db, parts)) as Array<Row & { [TOTAL]: unknown }>);
}

/** What pageWithTotal joins: see there. */
export interface PageParts<Row> {
  readonly count: Knex.QueryBuilder;
  readonly page: Knex.QueryBuilder;
  readonly order: string;
  readonly present: keyof Row & string;
}

/** pageWithTotal's statement, not run (for a compiled statement: compiled-statement.ts). */
export function pageWithTotalQuery<Row>(db: Knex, parts: PageParts<Row>): Knex.QueryBuilder {
  return (
    db
      .select("page.*", `total.${TOTAL}`)
      .from(parts.count.count({ [TOTAL]: "*" }).as("total"))
      // A query builder is a binding Knex inlines as a subquery (its type does not say so).
      .joinRaw("left join ? on true", [parts.page.as("page") as unknown as Knex.Raw])
      .orderByRaw(parts.order)
  );
}

/** The page and the total out of pageWithTotal's rows: the row of nulls dropped. */
export function pageOf<Row>(
  parts: Pick<PageParts<Row>, "present">,
  joined: ReadonlyArray<Row & { [TOTAL]?: unknown }>,
): { rows: Row[]; total: number } {
  return { rows: joined.filter((row) => row[parts.present] !== null), total: toCount(joined[0]?.[TOTAL]) };
}
