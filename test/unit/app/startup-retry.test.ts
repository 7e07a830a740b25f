import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { retryWhileDatabaseUnavailable } from "../../../src/app/startup-retry.js";
import type { Logger } from "../../../src/domain/shared/observability.js";

/** A logger that keeps the warnings it is given. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info() {}, debug() {}, error() {}, warn: (_object, message) => void warnings.push(message) };
}

/** What a starved pool throws when its first connection takes longer than the acquire timeout. */
function acquireTimeout(): Error {
  const error = new Error("Knex: Timeout acquiring a connection. The pool is probably full.");
  error.name = "KnexTimeoutError";
  return error;
}

describe("start-up retries its first database work while the database is unavailable", () => {
  test("an unavailable database (acquire timeout, connection refused) is retried until the work succeeds", async () => {
    const logger = recordingLogger();
    const failures: unknown[] = [
      acquireTimeout(),
      Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
    ];
    let calls = 0;
    const result = await retryWhileDatabaseUnavailable(
      "migrations",
      async () => {
        calls++;
        const failure = failures.shift();
        if (failure) throw failure;
        return "migrated";
      },
      logger,
      [1, 1, 1],
    );
    assert.equal(result, "migrated");
    assert.equal(calls, 3);
    assert.deepEqual(logger.warnings, [
      "start-up: migrations failed because the database is unavailable; retrying",
      "start-up: migrations failed because the database is unavailable; retrying",
    ]);
  });

  test("a failure that is not the database being unavailable (a bad migration) is thrown at once", async () => {
    const logger = recordingLogger();
    let calls = 0;
    const bad = Object.assign(new Error('relation "x" already exists'), { code: "42P07" });
    await assert.rejects(
      retryWhileDatabaseUnavailable(
        "migrations",
        async () => {
          calls++;
          throw bad;
        },
        logger,
        [1, 1, 1],
      ),
      (error) => error === bad,
    );
    assert.equal(calls, 1);
    assert.deepEqual(logger.warnings, []);
  });

  test("the retries are bounded: after the last delay the unavailable error is thrown (the process exits non-zero)", async () => {
    const logger = recordingLogger();
    let calls = 0;
    await assert.rejects(
      retryWhileDatabaseUnavailable(
        "loading signing keys",
        async () => {
          calls++;
          throw acquireTimeout();
        },
        logger,
        [1, 1],
      ),
      { name: "KnexTimeoutError" },
    );
    assert.equal(calls, 3);
    assert.equal(logger.warnings.length, 2);
  });
});
