import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Knex } from "knex";
import type { AuditEvent } from "../../src/domain/audit/model.js";
import { tenantScope, type TenantScope } from "../../src/domain/shared/tenant-scope.js";
import { auditPartitions, maintainAuditPartitions, monthStart } from "../../src/store/postgres/audit-partitions.js";
import type { Database } from "../../src/store/postgres/database.js";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { toRow } from "../../src/store/postgres/repositories/audit-repository.js";
import { postgresRepositories } from "../../src/store/postgres/repositories/index.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { backend, isPostgres, newStorage } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";

/** The migration that turns audit_events into a partitioned table. */
const PARTITIONING = "20261126001000_audit_partitions";

/**
 * The audit trail by month: a database with events from before is converted in place
 * (the old table becomes a partition, its file untouched: no copy, no rewrite), each API user's
 * last token time is backfilled from the trail and then raised by every batch, the search reads
 * across partitions newest first, and the partition job creates months ahead and drops whole
 * months past retention.
 */
describe(`audit trail partitions (${backend})`, () => {
  const storage = newStorage();
  const repos = postgresRepositories();
  let database: Database;
  let db: Knex;
  let uow: KnexUnitOfWork;
  let scope: TenantScope;
  let tmcId: string;
  const clientId = `c-${crypto.randomUUID()}`;
  const idle = `i-${crypto.randomUUID()}`;
  const all = { actions: [], clientId: undefined, since: undefined, until: undefined, beforeId: undefined };
  const config = () => (isPostgres ? { migrationSource, schemaName: database.schema } : { migrationSource });

  const issued = (at: string, debugIdentifier: string): AuditEvent => ({
    action: "TOKEN_ISSUED",
    outcome: "SUCCESS",
    actor: clientId,
    tmcId,
    targetClientId: clientId,
    debugIdentifier,
    occurredAt: new Date(at),
  });
  const lastIssued = async (client: string) =>
    (await repos.apiUsers.listActiveDetails(uow.direct, scope, { limit: 100, offset: 0 })).users.find(
      (u) => u.clientId === client,
    )?.lastTokenIssuedAt;
  const fileOf = async (table: string) =>
    (
      (await db.raw("select pg_relation_filenode(to_regclass(?)) as node", [table])) as {
        rows: Array<{ node: unknown }>;
      }
    ).rows[0]!.node;

  before(async () => {
    database = openStorageDatabase(storage);
    db = database.db;
    uow = new KnexUnitOfWork(db);
    await database.migrate();
    // Back to the schema before partitioning (it and every later migration undone), with events in
    // it, as a deployment upgrading would be.
    for (;;) {
      const [completed] = (await db.migrate.list(config())) as [Array<{ name: string }>, unknown];
      const newest = completed
        .map((m) => m.name)
        .sort()
        .at(-1);
      if (newest === undefined || newest < PARTITIONING) break;
      await db.migrate.down(config());
    }
    const tmc = await repos.tenants.createTmc(uow.direct, "Audit TMC", 5);
    tmcId = tmc.id;
    scope = tenantScope(tmcId);
    for (const client of [clientId, idle])
      await repos.apiUsers.insert(uow.direct, scope, {
        clientId: client,
        orgId: undefined,
        role: "TMC_ADMIN",
        credentialType: "CLIENT_CREDENTIALS",
        secretHash: crypto.randomBytes(32),
        createdBy: "operator",
      });
    // Inserted as the table stands before the migration (the repository's append already writes
    // the last-token table that comes with it).
    await db("audit_events").insert(
      [issued("2026-09-01T10:00:00Z", "old-1"), issued("2026-10-01T10:00:00Z", "old-2")].map(toRow),
    );
  });
  after(async () => {
    await database?.close();
    await dropStorage(storage);
  });

  test("the old table becomes the legacy partition in place, its events searchable, and each user's last token backfilled", async () => {
    const before = await fileOf("audit_events");
    const applied = (await database.migrate()).sort();
    assert.deepEqual(applied.slice(0, 2), [PARTITIONING, "20261126001100_api_user_last_token"]);
    assert.equal(await fileOf("audit_events_legacy"), before, "same file: not copied, not rewritten");
    const partitions = await auditPartitions(db);
    const legacy = partitions.find((p) => p.name === "audit_events_legacy")!;
    assert.ok(legacy.upper! > new Date(), "the legacy partition holds everything before a bound ahead of now");
    const months = partitions.filter((p) => p.name.startsWith("audit_events_p"));
    assert.deepEqual(
      months.map((p) => p.name),
      [0, 1, 2].map((m) => {
        const start = monthStart(legacy.upper!, m);
        return `audit_events_p${start.getUTCFullYear()}${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
      }),
    );
    assert.equal(partitions.at(-1)!.name, "audit_events_default");
    assert.deepEqual(
      (await repos.audit.search(uow.direct, scope, all, 10)).map((e) => e.debugIdentifier),
      ["old-2", "old-1"],
    );
    assert.deepEqual(await lastIssued(clientId), new Date("2026-10-01T10:00:00Z"), "backfilled from the trail");
    assert.equal(await lastIssued(idle), undefined, "no token, no time");
  });

  test("events of every month land in their partition; the search reads across them newest first, pages by id, and a client that is actor and target appears once", async () => {
    const legacyBound = (await auditPartitions(db)).find((p) => p.name === "audit_events_legacy")!.upper!;
    const inMonth = (m: number) => new Date(monthStart(legacyBound, m).getTime() + 3_600_000).toISOString();
    await repos.audit.append(uow.direct, [
      issued(inMonth(0), "month-0"),
      issued(inMonth(1), "month-1"),
      issued("2099-01-01T00:00:00Z", "far-future"),
    ]);
    const { rows } = (await db.raw(
      "select debug_identifier as d, tableoid::regclass::text as t from audit_events where tmc_id = ? order by id",
      [tmcId],
    )) as { rows: Array<{ d: string; t: string }> };
    assert.deepEqual(
      rows.map((r) => [r.d, r.t.replace(/^.*\./, "").replace(/"/g, "")]),
      [
        ["old-1", "audit_events_legacy"],
        ["old-2", "audit_events_legacy"],
        [
          "month-0",
          `audit_events_p${legacyBound.getUTCFullYear()}${String(legacyBound.getUTCMonth() + 1).padStart(2, "0")}`,
        ],
        ["month-1", rows[3]!.t.replace(/^.*\./, "").replace(/"/g, "")],
        ["far-future", "audit_events_default"],
      ],
    );
    assert.match(rows[3]!.t, /audit_events_p\d{6}/);
    assert.notEqual(rows[3]!.t, rows[2]!.t);

    const byClient = { ...all, clientId };
    const first = await repos.audit.search(uow.direct, scope, byClient, 2);
    assert.deepEqual(
      first.map((e) => e.debugIdentifier),
      ["far-future", "month-1"],
    );
    const second = await repos.audit.search(uow.direct, scope, { ...byClient, beforeId: first[1]!.id }, 10);
    assert.deepEqual(
      second.map((e) => e.debugIdentifier),
      ["month-0", "old-2", "old-1"],
    );
    assert.deepEqual(
      (await repos.audit.search(uow.direct, scope, { ...all, since: new Date(inMonth(1)) }, 10)).map(
        (e) => e.debugIdentifier,
      ),
      ["far-future", "month-1"],
    );
  });

  test("each batch raises the user's last token time to its newest event, and an older batch never lowers it", async () => {
    await repos.audit.append(uow.direct, [
      issued("2099-02-01T00:00:00Z", "newest"),
      issued("2099-01-15T00:00:00Z", "x"),
    ]);
    assert.deepEqual(await lastIssued(clientId), new Date("2099-02-01T00:00:00Z"));
    await repos.audit.append(uow.direct, [issued("2026-12-01T00:00:00Z", "late")]);
    assert.deepEqual(await lastIssued(clientId), new Date("2099-02-01T00:00:00Z"), "never backwards");
    await repos.audit.append(uow.direct, [
      { ...issued("2099-03-01T00:00:00Z", "other action"), action: "TOKEN_REFUSED", outcome: "DENIED" },
    ]);
    assert.deepEqual(await lastIssued(clientId), new Date("2099-02-01T00:00:00Z"), "only TOKEN_ISSUED counts");
  });

  test("the partition job creates the months ahead, and with a retention drops whole months past it, legacy included, never the default", async () => {
    const legacyBound = (await auditPartitions(db)).find((p) => p.name === "audit_events_legacy")!.upper!;
    // Five months after the legacy bound, keeping 2 whole months: the legacy table and the
    // partitions of the first two months after it end on or before the cutoff.
    const now = monthStart(legacyBound, 5);
    const noRetention = await maintainAuditPartitions(db, now, { monthsAhead: 3, retentionMonths: 0 });
    assert.deepEqual(noRetention.dropped, []);
    assert.deepEqual(
      noRetention.created,
      [5, 6, 7, 8].map((m) => {
        const start = monthStart(legacyBound, m);
        return `audit_events_p${start.getUTCFullYear()}${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
      }),
      "the current month and 3 ahead (months 0-2 came with the migration; past months are not made up)",
    );
    const second = await maintainAuditPartitions(db, now, { monthsAhead: 3, retentionMonths: 0 });
    assert.deepEqual(second, { created: [], dropped: [], moved: 0, acted: true, monthsAhead: 3 }, "idempotent");

    const kept = await maintainAuditPartitions(db, now, { monthsAhead: 3, retentionMonths: 2 });
    assert.deepEqual(kept.created, []);
    assert.deepEqual(kept.dropped, [
      "audit_events_legacy",
      ...[0, 1, 2].map((m) => {
        const start = monthStart(legacyBound, m);
        return `audit_events_p${start.getUTCFullYear()}${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
      }),
    ]);
    assert.deepEqual(
      (await repos.audit.search(uow.direct, scope, all, 10)).map((e) => e.debugIdentifier),
      ["other action", "x", "newest", "far-future"],
      "the events of dropped months are gone, the default partition's stay",
    );
    // The id sequence belonged to the old table: it must outlive it.
    await repos.audit.append(uow.direct, [issued(new Date(now.getTime() + 1000).toISOString(), "after the drop")]);
    assert.equal((await repos.audit.search(uow.direct, scope, all, 1))[0]!.debugIdentifier, "after the drop");
  });
  test("an event of a month not yet created waits in the default partition; the job moves it there instead of failing", async () => {
    // The first month with no partition yet is "now"; the job creates it and the 3 after it.
    const now = (await auditPartitions(db)).filter((p) => p.upper !== undefined).at(-1)!.upper!;
    const month = monthStart(now, 3);
    const name = `audit_events_p${month.getUTCFullYear()}${String(month.getUTCMonth() + 1).padStart(2, "0")}`;
    await repos.audit.append(uow.direct, [issued(new Date(month.getTime() + 3_600_000).toISOString(), "stray")]);
    const where = async () =>
      (
        (await db.raw(
          "select tableoid::regclass::text as partition from audit_events where debug_identifier = 'stray'",
        )) as {
          rows: Array<{ partition: string }>;
        }
      ).rows.map((r) => r.partition.replace(/^.*\./, ""));
    assert.deepEqual(await where(), ["audit_events_default"]);
    // Before: ATTACH failed ("updated partition constraint for default partition would be violated"), every run.
    const run = await maintainAuditPartitions(db, now, { monthsAhead: 3, retentionMonths: 0 });
    assert.ok(run.created.includes(name), JSON.stringify(run));
    assert.equal(run.moved, 1);
    assert.equal(run.monthsAhead, 3);
    assert.deepEqual(await where(), [name]);
  });
});
