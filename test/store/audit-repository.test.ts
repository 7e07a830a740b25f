import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { AuditEvent } from "../../src/domain/audit/model.js";
import { AuditRecordRejected } from "../../src/domain/audit/ports.js";
import { tenantScope } from "../../src/domain/shared/tenant-scope.js";
import type { Database } from "../../src/store/postgres/database.js";
import { PostgresAuditRepository } from "../../src/store/postgres/repositories/audit-repository.js";
import { KnexUnitOfWork } from "../../src/store/postgres/unit-of-work.js";
import { backend, newStorage } from "../helpers/backend.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { dropStorage } from "../helpers/service.js";

/**
 * The audit trail's writes (src/store/postgres/repositories/audit-repository.ts): a batch goes as
 * one JSON parameter, a single event as a plain insert. Whatever the path, an event reads back
 * exactly as recorded, a batch keeps its order, and a refused row refuses its whole batch as
 * AuditRecordRejected (the audit log then writes the batch one event at a time).
 */
describe(`audit repository writes (${backend})`, () => {
  const storage = newStorage();
  const repository = new PostgresAuditRepository();
  let database: Database;
  let uow: KnexUnitOfWork;

  before(async () => {
    database = openStorageDatabase(storage);
    await database.migrate();
    uow = new KnexUnitOfWork(database.db);
  });
  after(async () => {
    await database?.close();
    await dropStorage(storage);
  });

  const all = { actions: [], clientId: undefined, since: undefined, until: undefined, beforeId: undefined };
  /** Every event of a tenant, oldest first. */
  const trailOf = async (tmcId: string) =>
    (await repository.search(uow.direct, tenantScope(tmcId), all, 10_000)).reverse();

  function event(tmcId: string, i: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
    return {
      action: i % 2 ? "TOKEN_ISSUED" : "TOKEN_REFUSED",
      outcome: i % 2 ? "SUCCESS" : "DENIED",
      actor: `client-${i}`,
      tmcId,
      targetClientId: i % 3 ? `client-${i}` : null,
      debugIdentifier: `request-${i}`,
      details: { grantType: "client_credentials", remoteAddress: "203.0.113.7", attempt: i, limited: i % 5 === 0 },
      occurredAt: new Date(Date.UTC(2026, 10, 22, 10, 0, 0, i)),
      ...overrides,
    };
  }

  test("a batch of 300 reads back event by event, in the order it was given, with every field as recorded", async () => {
    const tmcId = crypto.randomUUID();
    const events = Array.from({ length: 300 }, (_, i) => event(tmcId, i));
    // Text that JSON and SQL both escape, and fields left empty.
    events[7] = event(tmcId, 7, {
      actor: `quote " backslash \\ apostrophe ' question ? dollar $1 emoji 🔑 accent é`,
      details: { note: `{"not": "an object"}`, path: "C:\\temp\\x", empty: "", zero: 0, no: false },
    });
    events[8] = event(tmcId, 8, { actor: null, targetClientId: null, debugIdentifier: null, details: {} });
    await repository.append(uow.direct, events);
    const trail = await trailOf(tmcId);
    assert.equal(trail.length, 300);
    trail.forEach(({ id: _id, ...read }, i) => assert.deepEqual(read, events[i], `event ${i}`));
  });

  test("a batch as large as AUDIT_BATCH_SIZE allows is one statement: more rows than a statement has parameters (65,535) for eight columns each", async () => {
    const tmcId = crypto.randomUUID();
    const events = Array.from({ length: 9_000 }, (_, i) => event(tmcId, i));
    await repository.append(uow.direct, events);
    const trail = await trailOf(tmcId);
    assert.equal(trail.length, 9_000);
    assert.deepEqual([trail[0]?.debugIdentifier, trail[8_999]?.debugIdentifier], ["request-0", "request-8999"]);
  });

  test("an event without a time gets the time of writing; without details, an empty object", async () => {
    const tmcId = crypto.randomUUID();
    const before = Date.now();
    const { occurredAt: _omitted, details: _none, ...bare } = event(tmcId, 1);
    await repository.append(uow.direct, [bare, { ...bare, debugIdentifier: "second" }]);
    await repository.append(uow.direct, [{ ...bare, debugIdentifier: "single" }]);
    const trail = await trailOf(tmcId);
    assert.deepEqual(
      trail.map((e) => e.debugIdentifier),
      ["request-1", "second", "single"],
    );
    for (const e of trail) {
      assert.ok(e.occurredAt.getTime() >= before - 1_000 && e.occurredAt.getTime() <= Date.now() + 1_000);
      assert.deepEqual(e.details, {});
    }
  });

  test("one refused row refuses its whole batch as AuditRecordRejected, on the batch path and the single-event path", async () => {
    const tmcId = crypto.randomUUID();
    const refusals: Array<[string, AuditEvent]> = [
      ["a tenant id that is not a UUID", event(tmcId, 1, { tmcId: "not-a-uuid" })],
      ["a NUL character in a text column", event(tmcId, 2, { actor: "a\u0000b" })],
      ["a NUL character in the details", event(tmcId, 3, { details: { note: "a\u0000b" } })],
    ];
    for (const [what, poisoned] of refusals) {
      await assert.rejects(
        repository.append(uow.direct, [event(tmcId, 10), poisoned, event(tmcId, 11)]),
        AuditRecordRejected,
        `batch: ${what}`,
      );
      await assert.rejects(repository.append(uow.direct, [poisoned]), AuditRecordRejected, `single: ${what}`);
    }
    assert.deepEqual(await trailOf(tmcId), [], "nothing of a refused batch was written");
  });
});
