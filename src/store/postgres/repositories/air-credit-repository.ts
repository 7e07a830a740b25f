import crypto from "node:crypto";
import type { Knex } from "knex";
import { DomainError, notFound } from "../../../errors/domain-error.js";
import type {
  CreditFilter,
  CreditPage,
  CreditUsageType,
  ImportedCredit,
  LockedCredit,
  NewAirCredit,
  NewPaymentSource,
  TransferableOn,
  TransferableValues,
  UnusedCredit,
} from "../../../domain/air-credits/model.js";
import type { AirCreditRepository, UnusedCreditRepository } from "../../../domain/air-credits/ports.js";
import type { TenantScope } from "../../../domain/shared/tenant-scope.js";
import type { Tx } from "../../../domain/shared/unit-of-work.js";
import { pageWithTotal } from "../paging.js";
import type { AirCreditRow, CompanyRow } from "../tables.js";
import { knexOf, tableIn } from "../unit-of-work.js";

export class PostgresAirCreditRepository implements AirCreditRepository, UnusedCreditRepository {
  async insertPaymentSource(tx: Tx, scope: TenantScope, source: NewPaymentSource): Promise<string> {
    await assertCompaniesOfTenant(tx, scope, [source.companyId]);
    const id = crypto.randomUUID();
    await knexOf(tx)("payment_sources").insert({
      id,
      company_id: source.companyId,
      fop_label: source.fopLabel,
      card_company: source.cardCompany ?? null,
      card_last4: source.cardLast4 ?? null,
      credit_usage_type: source.creditUsageType,
      transferable: source.transferable,
    });
    return id;
  }

  async insertCredits(tx: Tx, scope: TenantScope, credits: readonly NewAirCredit[]): Promise<number> {
    if (credits.length === 0) return 0;
    await assertCompaniesOfTenant(
      tx,
      scope,
      credits.map((c) => c.companyId),
    );
    await knexOf(tx)("air_credits").insert(
      credits.map((c) => ({
        id: crypto.randomUUID(),
        company_id: c.companyId,
        payment_source_id: c.paymentSourceId,
        traveler_user_id: c.travelerUserId ?? null,
        supplier: c.supplier,
        pcc: c.pcc ?? null,
        airline_code: c.airlineCode,
        ticket_number: c.ticketNumber,
        source_pnr: c.sourcePnr ?? null,
        total_fare_amount: c.totalFareAmount,
        currency_code: c.currencyCode,
        issue_date: instantOf(c.issueDate),
        expiry_date: instantOf(c.expiryDate),
      })) satisfies Array<Partial<AirCreditRow>>,
    );
    return credits.length;
  }

  async companyExists(tx: Tx, scope: TenantScope, companyId: string): Promise<boolean> {
    const row = await knexOf(tx)<CompanyRow>("companies").where({ id: companyId, tmc_id: scope.tmcId }).first("id");
    return row !== undefined;
  }

  async listTransferable(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    on: TransferableOn,
    filter: CreditFilter,
    page: { offset: number; limit: number },
  ): Promise<CreditPage> {
    const db = knexOf(tx);
    const matching = () => applyFilter(transferable(db, scope, companyId, on), filter);
    // The page's ids come from the index alone (its order, its filtered columns); only those
    // rows are then read from the table. The total comes in the same statement.
    const pageIds = matching()
      .select("c.id")
      .orderBy([{ column: "c.expiry_date" }, { column: "c.ticket_number" }])
      .limit(page.limit)
      .offset(page.offset);
    const { rows, total } = await pageWithTotal<CreditRow>(db, {
      count: matching(),
      page: db("air_credits as c")
        .whereIn("c.id", pageIds)
        .select([...creditColumns(db), "c.expiry_date as expiry_order"]),
      order: "page.expiry_order, page.ticket_number",
      present: "ticket_number",
    });
    return { credits: rows.map(toCredit), totalRecords: total };
  }

  async transferableValues(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    on: TransferableOn,
  ): Promise<TransferableValues> {
    const db = knexOf(tx);
    const [fopLabels, pccs, legalEntityNames] = await Promise.all(
      (["fop_label", "pcc", "legal_entity_name"] as const).map((column) =>
        distinctTransferable(db, scope, companyId, on, column),
      ),
    );
    return { fopLabels: fopLabels!, pccs: pccs!, legalEntityNames: legalEntityNames! };
  }

  async lockByPaymentSource(tx: Tx, scope: TenantScope, paymentSourceId: string): Promise<LockedCredit[]> {
    const result: RawResult = await knexOf(tx).raw(
      `SELECT c.company_id, c.status, to_char(c.expiry_date AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS expiry_date, c.airline_code, c.credit_usage_type
         FROM ${tableIn(tx, "air_credits")} AS c JOIN ${tableIn(tx, "companies")} AS co ON co.id = c.company_id
        WHERE c.payment_source_id = ? AND co.tmc_id = ?
        ORDER BY c.id
          FOR UPDATE OF c NOWAIT`,
      [paymentSourceId, scope.tmcId],
    );
    return (result.rows as Array<Record<string, string>>).map((r) => ({
      companyId: r.company_id!,
      status: r.status as LockedCredit["status"],
      expiryDate: r.expiry_date!,
      airlineCode: r.airline_code!,
      creditUsageType: r.credit_usage_type as CreditUsageType,
    }));
  }

  async setUsageType(tx: Tx, scope: TenantScope, paymentSourceId: string, type: CreditUsageType): Promise<void> {
    const db = knexOf(tx);
    const ofTenant = db<CompanyRow>("companies").select("id").where({ tmc_id: scope.tmcId });
    await db("air_credits")
      .where({ payment_source_id: paymentSourceId })
      .whereIn("company_id", ofTenant.clone())
      .update({ credit_usage_type: type, updated_at: db.fn.now() });
    await db("payment_sources")
      .where({ id: paymentSourceId })
      .whereIn("company_id", ofTenant.clone())
      .update({ credit_usage_type: type, updated_at: db.fn.now() });
  }

  async upsertCredits(
    tx: Tx,
    scope: TenantScope,
    companyId: string,
    credits: readonly ImportedCredit[],
  ): Promise<{ created: number; updated: number }> {
    await assertCompaniesOfTenant(tx, scope, [companyId]);
    if (credits.length === 0) return { created: 0, updated: 0 };
    const db = knexOf(tx);
    const existing = new Map<string, string>();
    const travelers = new Map<string, string>();
    const emails = [...new Set(credits.flatMap((c) => (c.email ? [c.email] : [])))];
    for (const tickets of chunks(
      credits.map((c) => c.ticketNumber),
      1000,
    )) {
      const rows = await db<AirCreditRow>("air_credits")
        .where({ company_id: companyId })
        .whereIn("ticket_number", tickets)
        .select("ticket_number", "payment_source_id");
      for (const r of rows) existing.set(r.ticket_number, r.payment_source_id);
    }
    for (const batch of chunks(emails, 1000)) {
      const rows = await db("users")
        .where({ company_id: companyId, tmc_id: scope.tmcId })
        .whereIn("email_normalized", batch)
        .select("id", "email_normalized");
      for (const r of rows as Array<{ id: string; email_normalized: string }>) travelers.set(r.email_normalized, r.id);
    }
    const resolved = credits.map((c) => ({
      credit: c,
      paymentSourceId: c.paymentSourceId || existing.get(c.ticketNumber) || crypto.randomUUID(),
    }));
    const named = [...new Set(credits.flatMap((c) => (c.paymentSourceId ? [c.paymentSourceId] : [])))];
    for (const batch of chunks(named, 1000)) {
      const foreign = (await db("payment_sources")
        .whereIn("id", batch)
        .whereNot({ company_id: companyId })
        .first("id")) as { id: string } | undefined;
      if (foreign)
        throw new DomainError("ALREADY_EXISTS", "A paymentSourceId of the file belongs to another company", {
          params: [{ name: "paymentSourceId", value: String(foreign.id) }],
        });
    }
    for (const batch of chunks(resolved, 500)) {
      await db("payment_sources")
        .insert(batch.map(({ credit: c, paymentSourceId }) => paymentSourceRow(companyId, paymentSourceId, c)))
        .onConflict("id")
        .merge(["fop_label", "card_company", "card_last4", "credit_usage_type", "updated_at"]);
      await db("air_credits")
        .insert(
          batch.map(({ credit: c, paymentSourceId }) =>
            creditRow(companyId, paymentSourceId, c.email ? travelers.get(c.email) : undefined, c),
          ),
        )
        .onConflict(["company_id", "ticket_number"])
        .merge(MERGED_COLUMNS);
    }
    const updated = credits.filter((c) => existing.has(c.ticketNumber)).length;
    return { created: credits.length - updated, updated };
  }

  async refreshStatisticsIfStale(tx: Tx): Promise<void> {
    const db = knexOf(tx);
    const result: RawResult = await db.raw(
      "SELECT n_mod_since_analyze AS changed, n_live_tup AS live FROM pg_stat_user_tables WHERE relid = to_regclass(?)",
      [tableIn(tx, "air_credits")],
    );
    const row = (result.rows as Array<{ changed: string | number; live: string | number }>)[0];
    if (!row) return;
    // Autovacuum's rule with a lower bar: 1000 changed rows and a fifth of the table.
    if (Number(row.changed) < Math.max(1000, 0.2 * Number(row.live))) return;
    // Best effort: a busy database may not finish it within the query timeout, and autovacuum
    // will gather the statistics anyway; the import itself has already committed.
    await db.raw(`ANALYZE ${tableIn(tx, "air_credits")}`).catch(() => undefined);
  }
}

async function assertCompaniesOfTenant(tx: Tx, scope: TenantScope, companyIds: readonly string[]): Promise<void> {
  const wanted = [...new Set(companyIds)];
  const found = await knexOf(tx)<CompanyRow>("companies")
    .whereIn("id", wanted)
    .where({ tmc_id: scope.tmcId })
    .select("id");
  if (found.length !== wanted.length) throw notFound("Company");
}

// ---- v3 helpers -------------------------------------------------------------------------------

/** What Knex's raw() resolves to on pg and PGlite alike: the rows, typed where they are read. */
type RawResult = { rows: unknown[] };

type PassengerNameJson = NonNullable<UnusedCredit["passengerName"]>;

/** An instant as the reference's DateTimeOffset writes it, in UTC whatever the session's time zone: 2031-01-01T04:30:00Z. */
const instant = (column: string) =>
  `to_char(c.${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as ${column}`;

/** The instant a day starts, in UTC: what a calendar date of a filter or of "today" is compared as. */
const utcMidnight = (day: string) => `${day}T00:00:00Z`;

/** A calendar date (YYYY-MM-DD) as its midnight UTC; an instant with its zone as it is. */
const instantOf = (value: string) => (value.length === 10 ? utcMidnight(value) : value);

function nextDay(day: string): string {
  const date = new Date(utcMidnight(day));
  date.setUTCDate(date.getUTCDate() + 1);
  return date.toISOString().slice(0, 10);
}

/**
 * What the store does with each air_credits column: how a listed credit reads it (`read`: as
 * stored; `amount` and `instant` as text, the same on pg and PGlite and never a float or a
 * local-time Date; absent: not read), and whether a re-imported ticket number overwrites it
 * (`merge`; the conflict key, the id and the creation time stay). Typed over the row, so a new
 * column must say both.
 */
const COLUMNS = {
  id: { merge: false },
  company_id: { read: "stored", merge: false },
  payment_source_id: { read: "stored", merge: true },
  traveler_user_id: { merge: true },
  supplier: { merge: true },
  pcc: { read: "stored", merge: true },
  airline_code: { read: "stored", merge: true },
  ticket_number: { read: "stored", merge: false },
  source_pnr: { read: "stored", merge: true },
  total_fare_amount: { read: "amount", merge: true },
  currency_code: { read: "stored", merge: true },
  issue_date: { read: "instant", merge: true },
  expiry_date: { read: "instant", merge: true },
  status: { read: "stored", merge: true },
  spotnana_pnr: { read: "stored", merge: true },
  airline_name: { read: "stored", merge: true },
  departure_date: { read: "instant", merge: true },
  used_date: { read: "instant", merge: true },
  passenger_name: { read: "stored", merge: true },
  email: { read: "stored", merge: true },
  departure_country: { read: "stored", merge: true },
  arrival_country: { read: "stored", merge: true },
  segments_available: { read: "stored", merge: true },
  ticket_type: { read: "stored", merge: true },
  source: { read: "stored", merge: true },
  trip_id: { read: "stored", merge: true },
  redeem_via: { read: "stored", merge: true },
  source_of_truth: { read: "stored", merge: true },
  owning_pcc: { read: "stored", merge: true },
  credit_usage_type: { read: "stored", merge: true },
  fop_label: { read: "stored", merge: true },
  fop_card_access_type: { read: "stored", merge: true },
  fop_info: { read: "stored", merge: true },
  previous_ticket: { read: "stored", merge: true },
  legal_entity_name: { read: "stored", merge: true },
  created_at: { merge: false },
  updated_at: { merge: true },
} as const satisfies { readonly [K in keyof AirCreditRow]: { readonly read?: ColumnRead; readonly merge: boolean } };

type ColumnRead = "stored" | "amount" | "instant";
type Column = keyof typeof COLUMNS;
type ReadColumn = { [K in Column]: (typeof COLUMNS)[K] extends { read: ColumnRead } ? K : never }[Column];
/** A listed credit as read by `creditColumns`. */
type CreditRow = Pick<AirCreditRow, ReadColumn>;

const COLUMN_USES = Object.entries(COLUMNS) as Array<[Column, { readonly read?: ColumnRead; readonly merge: boolean }]>;

function creditColumns(db: Knex): Array<string | Knex.Raw> {
  return COLUMN_USES.flatMap(([column, { read }]): Array<string | Knex.Raw> => {
    switch (read) {
      case undefined:
        return [];
      case "stored":
        return [`c.${column}`];
      case "amount":
        return [db.raw(`c.${column}::text as ${column}`)];
      case "instant":
        return [db.raw(instant(column))];
    }
  });
}

const MERGED_COLUMNS = COLUMN_USES.filter(([, use]) => use.merge).map(([column]) => column);

/** The transferability rule (domain/air-credits/transferability.ts) in SQL, confined to the tenant. */
function transferable(db: Knex, scope: TenantScope, companyId: string, on: TransferableOn): Knex.QueryBuilder {
  return (
    db("air_credits as c")
      .where("c.company_id", companyId)
      .whereExists(db("companies").select(db.raw("1")).where({ id: companyId, tmc_id: scope.tmcId }))
      // Literals, so the planner matches the partial indexes' predicate.
      .whereRaw("c.status = 'OPEN' AND c.credit_usage_type <> 'COMPANY'")
      .where("c.expiry_date", ">=", utcMidnight(on.today))
      .whereIn("c.airline_code", [...on.airlineCodes])
  );
}

function applyFilter(query: Knex.QueryBuilder, filter: CreditFilter): Knex.QueryBuilder {
  if (filter.suppliers.length > 0) query.whereIn("c.supplier", [...filter.suppliers]);
  if (filter.airlineCodes.length > 0) query.whereIn("c.airline_code", [...filter.airlineCodes]);
  // Calendar days of the expiry instant in UTC, both ends inclusive.
  if (filter.expiryFrom !== undefined) query.where("c.expiry_date", ">=", utcMidnight(filter.expiryFrom));
  if (filter.expiryTo !== undefined) query.where("c.expiry_date", "<", utcMidnight(nextDay(filter.expiryTo)));
  if (filter.fopLabels.length > 0) query.whereIn("c.fop_label", [...filter.fopLabels]);
  if (filter.pccs.length > 0) query.whereIn("c.pcc", [...filter.pccs]);
  if (filter.fopCardAccessTypes.length > 0) query.whereIn("c.fop_card_access_type", [...filter.fopCardAccessTypes]);
  if (filter.legalEntityNames.length > 0) query.whereIn("c.legal_entity_name", [...filter.legalEntityNames]);
  return query;
}

/**
 * Distinct non-empty values of a column over the company's transferable credits, sorted: a loose
 * index scan (one index probe per distinct value), so its cost follows the number of values,
 * not of credits.
 */
async function distinctTransferable(
  db: Knex,
  scope: TenantScope,
  companyId: string,
  on: TransferableOn,
  column: "fop_label" | "pcc" | "legal_entity_name",
): Promise<string[]> {
  const airlines = on.airlineCodes.map(() => "?").join(", ");
  const condition = `c.company_id = ? AND c.status = 'OPEN' AND c.credit_usage_type <> 'COMPANY' AND c.expiry_date >= ? AND c.airline_code IN (${airlines})`;
  const params = [companyId, utcMidnight(on.today), ...on.airlineCodes];
  const result: RawResult = await db.raw(
    `WITH RECURSIVE v(val) AS (
       (SELECT c.${column} FROM ${tableIn(db, "air_credits")} AS c WHERE ${condition} AND c.${column} > '' ORDER BY c.${column} LIMIT 1)
       UNION ALL
       SELECT (SELECT c.${column} FROM ${tableIn(db, "air_credits")} AS c WHERE ${condition} AND c.${column} > v.val ORDER BY c.${column} LIMIT 1)
         FROM v WHERE v.val IS NOT NULL
     )
     SELECT val FROM v WHERE val IS NOT NULL AND EXISTS (SELECT 1 FROM ${tableIn(db, "companies")} WHERE id = ? AND tmc_id = ?)`,
    [...params, ...params, companyId, scope.tmcId],
  );
  return (result.rows as Array<{ val: string }>).map((r) => r.val);
}

const optional = (value: string | null): string | undefined => (value === null || value === "" ? undefined : value);
const json = <T>(value: object | string | null): T | undefined =>
  value === null ? undefined : typeof value === "string" ? (JSON.parse(value) as T) : (value as T);

function toCredit(r: CreditRow): UnusedCredit {
  return {
    paymentSourceId: r.payment_source_id,
    companyId: r.company_id,
    ticketNumber: r.ticket_number,
    sourcePnr: optional(r.source_pnr),
    spotnanaPnr: optional(r.spotnana_pnr),
    airlineCode: r.airline_code,
    airlineName: optional(r.airline_name),
    totalFare: { amount: r.total_fare_amount, currencyCode: r.currency_code },
    issueDate: r.issue_date,
    expiryDate: r.expiry_date,
    usedDate: optional(r.used_date),
    departureDate: optional(r.departure_date),
    segmentsAvailable: optional(r.segments_available),
    passengerName: json<PassengerNameJson>(r.passenger_name),
    departureCountry: optional(r.departure_country),
    arrivalCountry: optional(r.arrival_country),
    ticketType: r.ticket_type,
    pcc: optional(r.pcc),
    status: r.status as UnusedCredit["status"],
    source: r.source,
    tripId: optional(r.trip_id),
    redeemVia: optional(r.redeem_via),
    sourceOfTruth: optional(r.source_of_truth),
    owningPcc: optional(r.owning_pcc),
    creditUsageType: r.credit_usage_type as CreditUsageType,
    email: optional(r.email),
    fopInfo: json<Record<string, unknown>>(r.fop_info),
    fopLabel: optional(r.fop_label),
    previousTicket: optional(r.previous_ticket),
    fopCardAccessType: optional(r.fop_card_access_type),
    legalEntityName: optional(r.legal_entity_name),
  };
}

function creditRow(
  companyId: string,
  paymentSourceId: string,
  travelerUserId: string | undefined,
  c: ImportedCredit,
): Omit<AirCreditRow, "created_at"> {
  return {
    id: crypto.randomUUID(),
    company_id: companyId,
    payment_source_id: paymentSourceId,
    traveler_user_id: travelerUserId ?? null,
    supplier: c.source,
    pcc: c.pcc ?? null,
    airline_code: c.airlineCode,
    ticket_number: c.ticketNumber,
    source_pnr: c.sourcePnr ?? null,
    total_fare_amount: c.totalFare.amount,
    currency_code: c.totalFare.currencyCode,
    issue_date: c.issueDate,
    expiry_date: c.expiryDate,
    status: c.status,
    spotnana_pnr: c.spotnanaPnr ?? null,
    airline_name: c.airlineName ?? null,
    departure_date: c.departureDate ?? null,
    used_date: c.usedDate ?? null,
    passenger_name: c.passengerName === undefined ? null : JSON.stringify(c.passengerName),
    email: c.email ?? null,
    departure_country: c.departureCountry ?? null,
    arrival_country: c.arrivalCountry ?? null,
    segments_available: c.segmentsAvailable ?? null,
    ticket_type: c.ticketType,
    source: c.source,
    trip_id: c.tripId ?? null,
    redeem_via: c.redeemVia ?? null,
    source_of_truth: c.sourceOfTruth ?? null,
    owning_pcc: c.owningPcc ?? null,
    credit_usage_type: c.creditUsageType,
    fop_label: c.fopLabel ?? null,
    fop_card_access_type: c.fopCardAccessType ?? null,
    fop_info: c.fopInfo === undefined ? null : JSON.stringify(c.fopInfo),
    previous_ticket: c.previousTicket ?? null,
    legal_entity_name: c.legalEntityName ?? null,
    updated_at: new Date(),
  };
}

function paymentSourceRow(companyId: string, paymentSourceId: string, c: ImportedCredit) {
  const card = (c.fopInfo?.card ?? undefined) as { company?: unknown; number?: unknown } | undefined;
  return {
    id: paymentSourceId,
    company_id: companyId,
    fop_label: c.fopLabel ?? "",
    card_company: typeof card?.company === "string" ? card.company : null,
    card_last4: typeof card?.number === "string" ? card.number.slice(-4) : null,
    credit_usage_type: c.creditUsageType,
    transferable: true,
    updated_at: new Date(),
  };
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
