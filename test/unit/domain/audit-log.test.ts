import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { AuditLog } from "../../../src/domain/audit/audit-log.js";
import type { AuditEvent } from "../../../src/domain/audit/model.js";
import { AuditRecordRejected, type AuditRepository } from "../../../src/domain/audit/ports.js";
import { silentLogger } from "../../../src/domain/shared/observability.js";
import type { Tx, UnitOfWork } from "../../../src/domain/shared/unit-of-work.js";

const FIXED = new Date("2026-11-22T10:00:00Z");
const uow: UnitOfWork = { direct: {} as Tx, transaction: (work) => work({} as Tx) };

/** An audit table that refuses writes while `down` is set. */
class FlakyAuditRepository implements AuditRepository {
  down = true;
  readonly rows: AuditEvent[] = [];
  async append(_tx: Tx, events: readonly AuditEvent[]) {
    if (this.down) throw new Error('relation "audit_events" does not exist');
    this.rows.push(...events);
  }
  async list() {
    return [];
  }
  async search() {
    return [];
  }
  async searchPlatform() {
    return [];
  }
}

function counter() {
  let value = 0;
  return {
    inc: (n = 1) => void (value += n),
    get value() {
      return value;
    },
  };
}

/** Counts per tenant, as the audit_events_written_total{tmc_id} counter does; `value` is the total. */
function tenantCounter() {
  const perTenant = new Map<string, number>();
  return {
    inc: (labels: { tmc_id?: string }, n = 1) =>
      void perTenant.set(labels.tmc_id!, (perTenant.get(labels.tmc_id!) ?? 0) + n),
    perTenant,
    get value() {
      return [...perTenant.values()].reduce((a, b) => a + b, 0);
    },
  };
}

function event(i: number): AuditEvent {
  return {
    action: "TOKEN_ISSUED",
    outcome: "SUCCESS",
    actor: `c${i}`,
    tmcId: null,
    targetClientId: null,
    debugIdentifier: `r${i}`,
  };
}

describe("audit log batching", () => {
  test("a failed write is kept and counted; the next flush and close write everything, in order", async () => {
    const repository = new FlakyAuditRepository();
    const metrics = { written: tenantCounter(), writeFailures: counter(), dropped: counter(), rejected: counter() };
    const log = new AuditLog(
      { uow, events: repository, logger: silentLogger, metrics, clock: () => FIXED },
      {
        batchSize: 2,
        maxBuffered: 100,
        closeRetryDelaysMs: [1],
      },
    );
    for (let i = 0; i < 5; i++) log.record(event(i));
    await log.flush();
    assert.ok(metrics.writeFailures.value >= 1, "write failures are counted");
    assert.equal(metrics.written.value, 0);

    repository.down = false;
    await log.close();
    assert.equal(metrics.written.value, 5);
    assert.equal(metrics.dropped.value, 0);
    assert.deepEqual(
      repository.rows.map((r) => r.actor),
      ["c0", "c1", "c2", "c3", "c4"],
    );
    assert.ok(
      repository.rows.every((r) => r.occurredAt?.getTime() === FIXED.getTime()),
      "events carry the injected clock's time",
    );
  });

  test("beyond maxBuffered the oldest events are dropped and counted; close gives up loudly", async () => {
    const repository = new FlakyAuditRepository();
    const metrics = { written: tenantCounter(), writeFailures: counter(), dropped: counter(), rejected: counter() };
    const log = new AuditLog(
      { uow, events: repository, logger: silentLogger, metrics, clock: () => FIXED },
      {
        batchSize: 100,
        maxBuffered: 3,
        closeRetryDelaysMs: [1, 1],
      },
    );
    for (let i = 0; i < 5; i++) log.record(event(i));
    assert.equal(metrics.dropped.value, 2);
    await log.close();
    assert.equal(metrics.dropped.value, 5, "the three left are lost, and counted, when the database never comes back");
    assert.equal(repository.rows.length, 0);
  });

  test("an event the database refuses is set aside and counted; the rest of the trail is written (issue 8: one NUL stopped the trail)", async () => {
    /** Refuses any batch holding a poisoned event, as Postgres refuses a whole insert for one bad row. */
    class PoisonAwareRepository extends FlakyAuditRepository {
      override async append(tx: Tx, events: readonly AuditEvent[]) {
        if (events.some((e) => e.actor === "poison")) throw new AuditRecordRejected(new Error("invalid byte sequence"));
        return super.append(tx, events);
      }
    }
    const repository = new PoisonAwareRepository();
    repository.down = false;
    const metrics = { written: tenantCounter(), writeFailures: counter(), dropped: counter(), rejected: counter() };
    const log = new AuditLog(
      { uow, events: repository, logger: silentLogger, metrics, clock: () => FIXED },
      {
        batchSize: 10,
        maxBuffered: 100,
        closeRetryDelaysMs: [1],
      },
    );
    log.record(event(0));
    log.record({ ...event(1), actor: "poison" });
    log.record(event(2));
    await log.flush();
    for (let i = 3; i < 13; i++) log.record(event(i));
    await log.close();
    assert.equal(metrics.rejected.value, 1);
    assert.equal(metrics.written.value, 12);
    assert.equal(metrics.writeFailures.value, 0, "a refused record is not a retried failure");
    assert.deepEqual(
      repository.rows.map((r) => r.actor),
      ["c0", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12"],
    );
  });

  test("recorded text is sanitised: no control characters, no unbounded values", async () => {
    const repository = new FlakyAuditRepository();
    repository.down = false;
    const metrics = { written: tenantCounter(), writeFailures: counter(), dropped: counter(), rejected: counter() };
    const log = new AuditLog(
      { uow, events: repository, logger: silentLogger, metrics, clock: () => FIXED },
      {
        batchSize: 10,
        maxBuffered: 100,
        closeRetryDelaysMs: [],
      },
    );
    log.record({ ...event(0), actor: "a\u0000b\r\nc", details: { grantType: "x".repeat(1000), errorCode: "E\u0007" } });
    await log.close();
    const [row] = repository.rows;
    assert.equal(row?.actor, "a\uFFFDb\uFFFD\uFFFDc");
    assert.equal(String(row?.details?.grantType).length, 256);
    assert.equal(row?.details?.errorCode, "E\uFFFD");
  });
});
