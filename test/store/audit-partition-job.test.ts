import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import knexPkg from "knex";
import { auditPartitionJob, startBackgroundJobs } from "../../src/app/background-jobs.js";
import type { Logger } from "../../src/domain/shared/observability.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { maintainAuditPartitions, monthPartitionName, monthStart } from "../../src/store/postgres/audit-partitions.js";
import type { Database } from "../../src/store/postgres/database.js";
import { isPostgres, newStorage, TEST_DATABASE_URL } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { openStorageDatabase } from "../helpers/storage-database.js";

const silent: Logger = { info() {}, warn() {}, debug() {}, error() {} };

/** The production jobs pool's per-statement timeout (DATABASE_QUERY_TIMEOUT_MS' default). */
const POOL_QUERY_TIMEOUT_MS = 1_000;

/**
 * The audit partition job as an instance runs it: at start, not an interval (an hour) later, and
 * its lock waits bounded by the documented 5 s lock_timeout, not cut at the jobs pool's 1 s
 * statement timeout (a busy trail made every run fail).
 */
describe(
  "the audit partition job (postgres)",
  { skip: !isPostgres && "the embedded database's audit trail is one table: it has no partitions to maintain" },
  () => {
    const storage = newStorage();
    let database: Database;
    const partitionExists = async (name: string) =>
      (
        (await database.db.raw("select to_regclass(?) is not null as found", [`"${storage.schema}".${name}`])) as {
          rows: Array<{ found: boolean }>;
        }
      ).rows[0]!.found;

    before(async () => {
      database = openStorageDatabase(storage, { databaseQueryTimeoutMs: POOL_QUERY_TIMEOUT_MS });
      await database.migrate();
    });
    after(async () => {
      await database?.close();
      await dropStorage(storage);
    });

    test("it runs as soon as the jobs start, with an hour's interval: the months ahead exist and the gauge is set at once", async () => {
      // A clock years ahead: none of its months exist until the job makes them.
      const now = new Date("2031-05-15T12:00:00Z");
      const ahead = monthPartitionName(monthStart(now, 3));
      assert.equal(await partitionExists(ahead), false);
      const metrics = createMetrics();
      const job = auditPartitionJob(
        { jobs: { auditPartitionIntervalMs: 3_600_000 } as never, audit: { retentionMonths: 0 } as never },
        database.jobsDb,
        () => now,
        silent,
        metrics,
      );
      const jobs = startBackgroundJobs([job], silent);
      try {
        const deadline = Date.now() + 20_000;
        while (!(await partitionExists(ahead)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      } finally {
        await jobs.stop();
      }
      assert.equal(await partitionExists(ahead), true, `${ahead} created at start`);
      const maintained = (await metrics.auditPartitionMaintained.get()).values[0]?.value;
      assert.equal(maintained, now.getTime() / 1000, "audit_partition_maintenance_last_success_timestamp_seconds set");
      assert.equal((await metrics.auditPartitionsAhead.get()).values[0]?.value, 3);
    });

    test("a conflicting lock held for 2 s: the job waits for it (lock_timeout 5 s) and succeeds, the pool's 1 s timeout does not end it", async () => {
      const now = new Date("2032-02-10T00:00:00Z");
      const holder = knexPkg.knex({ client: "pg", connection: TEST_DATABASE_URL, pool: { min: 1, max: 1 } });
      try {
        const trx = await holder.transaction();
        await trx.raw(`lock table "${storage.schema}".audit_events in access exclusive mode`);
        const held = setTimeout(() => void trx.commit(), 2_000);
        const started = Date.now();
        try {
          const run = await maintainAuditPartitions(database.jobsDb, now, { monthsAhead: 3, retentionMonths: 0 });
          const waitedMs = Date.now() - started;
          assert.ok(run.acted);
          assert.ok(run.created.includes(monthPartitionName(monthStart(now, 3))), JSON.stringify(run));
          assert.ok(waitedMs >= 1_800, `it waited for the lock (${waitedMs} ms)`);
        } finally {
          clearTimeout(held);
          if (!trx.isCompleted()) await trx.commit();
        }
      } finally {
        await holder.destroy();
      }
    });
  },
);
