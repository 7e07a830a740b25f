import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { retryWhileDatabaseUnavailable, startupRetryDelays, startupRetryOf } from "../../../src/app/startup-retry.js";
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
      { logger, delaysMs: [1, 1, 1] },
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
        { logger, delaysMs: [1, 1, 1] },
      ),
      (error) => error === bad,
    );
    assert.equal(calls, 1);
    assert.deepEqual(logger.warnings, []);
  });

  test("the retries are bounded: after the last delay the failure names the server and its cause (the process exits non-zero)", async () => {
    const logger = recordingLogger();
    let calls = 0;
    const refused = Object.assign(new Error("connect ECONNREFUSED 10.0.0.7:6432"), { code: "ECONNREFUSED" });
    await assert.rejects(
      retryWhileDatabaseUnavailable(
        "loading signing keys",
        async () => {
          calls++;
          // The pool's timeout, as Knex throws it, with the socket's refusal underneath.
          throw Object.assign(acquireTimeout(), { cause: refused });
        },
        { logger, delaysMs: [1, 1], target: "10.0.0.7:6432" },
      ),
      (error: Error) => {
        assert.equal(error.name, "DatabaseUnreachableError");
        assert.match(
          error.message,
          /^Postgres at 10\.0\.0\.7:6432 did not answer \(connection refused \(ECONNREFUSED\)\) while loading signing keys: 3 attempt\(s\)/,
        );
        assert.doesNotMatch(error.message, /pool/);
        return true;
      },
    );
    assert.equal(calls, 3);
    assert.equal(logger.warnings.length, 2);
  });

  test("the waits double from 250 ms up to 8 s and add up to DATABASE_STARTUP_WAIT_MS; 0 does not retry", () => {
    assert.deepEqual(startupRetryDelays(30_000), [250, 500, 1_000, 2_000, 4_000, 8_000, 8_000, 6_250]);
    assert.deepEqual(startupRetryDelays(1_000), [250, 500, 250]);
    assert.deepEqual(startupRetryDelays(0), []);
  });

  test("the server is named by host and port only, never the credentials of DATABASE_URL", () => {
    const logger = recordingLogger();
    const retry = startupRetryOf(
      { databaseUrl: "postgres://auth:s3cret@db.internal:6543/auth?sslmode=require", databaseStartupWaitMs: 0 },
      logger,
    );
    assert.equal(retry.target, "db.internal:6543");
    assert.equal(
      startupRetryOf({ databaseUrl: "postgres://db.internal/auth", databaseStartupWaitMs: 0 }, logger).target,
      "db.internal:5432",
    );
  });
});
