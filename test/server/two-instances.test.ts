// Two instances on one storage. Postgres: both start at once on a fresh schema (migrations run
// once under the advisory lock), share tenants, and enforce one API-user limit together.
// Embedded (PGlite): DATA_DIR belongs to one instance at a time, and its data survives a restart.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import knexPkg from "knex";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";
import { migrationSource } from "../../src/store/postgres/migrations/index.js";
import { internalsOf } from "../../src/app/test-access.js";
import { isPostgres, newStorage, serviceEnv, TEST_DATABASE_URL, type Storage } from "../helpers/backend.js";
import { dropStorage, operatorCall, operatorHeaders, startService, type RunningService } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";
import { entryPoint } from "../helpers/server-process.js";

const root = fileURLToPath(new URL("../../", import.meta.url));

const started: RunningService[] = [];
const storages: Storage[] = [];

/** Starts an instance that `after` stops even when the test fails half-way. */
async function start(storage: Storage): Promise<RunningService> {
  const running = await startService({ storage });
  started.push(running);
  return running;
}

async function stop(running: RunningService): Promise<void> {
  const index = started.indexOf(running);
  if (index >= 0) started.splice(index, 1);
  await running.stop();
}

function freshStorage(): Storage {
  const storage = newStorage();
  storages.push(storage);
  return storage;
}

after(async () => {
  for (const running of started.splice(0)) await running.stop().catch(() => {});
  for (const storage of storages) await dropStorage(storage);
});

/** /readyz turns 200 once Redis is connected (the service starts before that, reporting not ready). */
async function waitReady(baseUrl: string): Promise<Record<string, any>> {
  return waitFor(`${baseUrl}/readyz to answer 200`, async () => {
    const response = await fetch(`${baseUrl}/readyz`);
    const body = (await response.json()) as Record<string, any>;
    return response.status === 200 && body;
  });
}

/** A raw Connect-JSON call: HTTP status, body, and the decoded ErrorResponse detail when it failed. */
async function connectJson(baseUrl: string, method: string, body: object) {
  const response = await fetch(`${baseUrl}/travel.operator.v1.OperatorService/${method}`, {
    method: "POST",
    headers: { ...operatorHeaders, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, any>;
  let errorResponse: ErrorResponse | undefined;
  if (!response.ok) {
    const detail = (json.details as Array<{ type: string; value: string }> | undefined)?.find(
      (d) => d.type === "travel.common.v1.ErrorResponse",
    );
    if (detail) errorResponse = fromBinary(ErrorResponseSchema, base64Decode(detail.value));
  }
  return { status: response.status, json, errorResponse };
}

describe("two instances on one Postgres schema", { skip: !isPostgres && "Postgres backend only" }, () => {
  let a: RunningService;
  let b: RunningService;
  let storage: Storage;

  it("start at the same time on a fresh schema; migrations run exactly once", async () => {
    storage = freshStorage();
    [a, b] = await Promise.all([start(storage), start(storage)]);
    assert.notEqual(a.baseUrl, b.baseUrl);

    const expected = await migrationSource.getMigrations([]);
    const db = knexPkg.knex({ client: "pg", connection: TEST_DATABASE_URL, searchPath: [storage.schema!] });
    try {
      const rows = (await db("knex_migrations").select("name", "batch").orderBy("id")) as Array<{
        name: string;
        batch: number;
      }>;
      assert.deepEqual(
        rows.map((r) => r.name),
        expected,
        "one knex_migrations row per migration",
      );
      assert.deepEqual([...new Set(rows.map((r) => r.batch))], [1], "all applied in a single batch");
      const locks = (await db("knex_migrations_lock").select("is_locked")) as Array<{ is_locked: number }>;
      assert.deepEqual(
        locks.map((l) => l.is_locked),
        [0],
        "knex's migration lock was released",
      );
      const [{ schema }] = (await db.raw("select current_schema() as schema")).rows;
      assert.equal(schema, storage.schema);
    } finally {
      await db.destroy();
    }
    // Neither instance has anything left to apply.
    assert.deepEqual(await internalsOf(a.service).migrate(), []);
    assert.deepEqual(await internalsOf(b.service).migrate(), []);
  });

  it("both answer /readyz 200", async () => {
    for (const running of [a, b]) {
      const body = await waitReady(running.baseUrl);
      assert.equal(body.status, "ready");
      assert.deepEqual(body.storage, { database: "postgres", redis: "redis" });
    }
  });

  it("a TMC created through instance A is usable through instance B", async () => {
    const tmc = await operatorCall<{ tmcId: string; maxApiUsers: number }>(a.baseUrl, "CreateTmc", {
      name: "Shared TMC",
    });
    const company = await operatorCall<{ orgId: string; tmcId: string }>(b.baseUrl, "CreateCompany", {
      tmcId: tmc.tmcId,
      name: "Made on B",
    });
    assert.equal(company.tmcId, tmc.tmcId);
    const limit = await operatorCall<{ tmcId: string; maxApiUsers: number }>(b.baseUrl, "SetTmcApiUserLimit", {
      tmcId: tmc.tmcId,
      maxApiUsers: 6,
    });
    assert.equal(limit.maxApiUsers, 6);
  });

  it("10 concurrent CreateApiUser calls over both instances: exactly 5 succeed under a limit of 5", async () => {
    const tmc = await operatorCall<{ tmcId: string; maxApiUsers: number }>(a.baseUrl, "CreateTmc", {
      name: "Race TMC",
    });
    assert.equal(tmc.maxApiUsers, 5);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        connectJson((i % 2 === 0 ? a : b).baseUrl, "CreateApiUser", {
          tmcId: tmc.tmcId,
          role: "TMC_ADMIN",
          credentialType: "CLIENT_CREDENTIALS",
        }),
      ),
    );
    const succeeded = results.filter((r) => r.status === 200);
    const failed = results.filter((r) => r.status !== 200);
    assert.equal(succeeded.length, 5, JSON.stringify(results.map((r) => r.status)));
    assert.equal(failed.length, 5);
    for (const ok of succeeded) {
      assert.match(ok.json.clientId, /\S/);
      assert.match(ok.json.clientSecret, /\S/);
    }
    assert.equal(new Set(succeeded.map((r) => r.json.clientId)).size, 5, "distinct clientIds");
    for (const rejected of failed) {
      assert.equal(rejected.status, 400, "Connect maps failed_precondition to HTTP 400");
      assert.equal(rejected.json.code, "failed_precondition");
      const body = rejected.errorResponse;
      assert.ok(body, `ErrorResponse detail in ${JSON.stringify(rejected.json)}`);
      assert.match(body.debugIdentifier, /\S/);
      assert.equal(body.errorMessages[0]?.errorCode, "API_USER_LIMIT_EXCEEDED");
      assert.deepEqual(Object.fromEntries(body.errorMessages[0]!.errorParameters.map((p) => [p.name, p.value])), {
        limit: "5",
        currentCount: "5",
      });
    }
    const [{ n }] = await internalsOf(a.service)
      .db("api_users")
      .where({ tmc_id: tmc.tmcId })
      .whereNull("revoked_at")
      .count({ n: "*" });
    assert.equal(Number(n), 5, "exactly five active API users stored");
  });
});

describe(
  "embedded DATA_DIR is owned by one instance at a time",
  { skip: isPostgres && "embedded backend only" },
  () => {
    it("another process cannot start on the DATA_DIR while an instance runs; after a restart the data is still there", async () => {
      const storage = freshStorage();
      const first = await start(storage);
      const tmc = await operatorCall<{ tmcId: string }>(first.baseUrl, "CreateTmc", { name: "Persisted TMC" });
      const lockFile = path.join(storage.dataDir, "owner.pid");
      assert.equal(fs.readFileSync(lockFile, "utf8"), String(process.pid));

      // A second instance, as production starts it: its own process running src/main.ts.
      const outcome = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(
          process.execPath,
          entryPoint("src/main.ts"),
          { cwd: root, env: { ...process.env, ...serviceEnv(storage) }, timeout: 60_000 },
          (error, _stdout, stderr) =>
            resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr }),
        );
      });
      assert.equal(outcome.code, 2, `second instance exits with status 2; stderr: ${outcome.stderr}`);
      assert.match(outcome.stderr, /is in use/);
      assert.ok(outcome.stderr.includes(storage.dataDir), outcome.stderr);
      assert.ok(outcome.stderr.includes(String(process.pid)), "names the owning process");

      // The failed start did not disturb the owner.
      assert.equal(fs.readFileSync(lockFile, "utf8"), String(process.pid));
      await waitReady(first.baseUrl);

      await stop(first);
      assert.equal(fs.existsSync(lockFile), false, "the lock is released on close");

      const second = await start(storage);
      const found = await operatorCall<{ tmcId: string; name: string; maxApiUsers: number }>(
        second.baseUrl,
        "SetTmcApiUserLimit",
        {
          tmcId: tmc.tmcId,
          maxApiUsers: 9,
        },
      );
      assert.deepEqual([found.tmcId, found.name, found.maxApiUsers], [tmc.tmcId, "Persisted TMC", 9]);
      await stop(second);
    });

    it("a second instance in the same process cannot start on the DATA_DIR while the first runs", async () => {
      const storage = freshStorage();
      const first = await start(storage);
      let second: RunningService | undefined;
      try {
        await assert.rejects(
          startService({ storage }).then((running) => {
            second = running;
            return running;
          }),
          (error: Error) => {
            assert.match(error.message, /is in use/);
            assert.ok(error.message.includes(storage.dataDir), error.message);
            return true;
          },
        );
        // The rejected start left the first instance its lock and its database.
        assert.equal(fs.readFileSync(path.join(storage.dataDir, "owner.pid"), "utf8"), String(process.pid));
        await operatorCall(first.baseUrl, "CreateTmc", { name: "still works" });
      } finally {
        await second?.stop();
        await stop(first);
      }
    });
  },
);
