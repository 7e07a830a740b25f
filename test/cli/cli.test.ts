// End-to-end tests of the operator CLI (src/cli/main.ts) as operators run it: a child process
// per command, against a server running as another child process (on the embedded backend the
// server owns DATA_DIR, so every successful command there proves the CLI went through it), and
// offline, when no server answers. Runs on the backend chosen by TEST_BACKEND.
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { backend, isPostgres, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { openStorageDatabase } from "../helpers/storage-database.js";
import { runCli, spawnServer, type CliResult, type ServerProcess } from "../helpers/server-process.js";
import { toCount } from "../../src/store/postgres/tables.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Nothing listens on port 1: the CLI finds no server there and runs the RPC in-process. */
const NO_SERVER = "http://127.0.0.1:1";

/** Runs several CLI invocations, at most `limit` at a time (the machine has few cores). */
async function runAll<T>(
  items: readonly T[],
  limit: number,
  run: (item: T) => Promise<CliResult>,
): Promise<CliResult[]> {
  const results: CliResult[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await run(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

const describeRun = (args: readonly string[], r: CliResult) =>
  `cli ${JSON.stringify(args)} → exit ${r.code}\nstdout: ${JSON.stringify(r.stdout)}\nstderr:\n${r.stderr.slice(0, 3000)}`;

/** Exit 0 and stdout is exactly one line holding one JSON object. */
function jsonOf(args: readonly string[], r: CliResult): Record<string, unknown> {
  assert.equal(r.code, 0, describeRun(args, r));
  assert.ok(r.stdout.endsWith("\n"), `stdout ends with a newline: ${describeRun(args, r)}`);
  assert.equal(r.stdout.slice(0, -1).split("\n").length, 1, `stdout is exactly one line: ${describeRun(args, r)}`);
  const value: unknown = JSON.parse(r.stdout);
  assert.ok(
    typeof value === "object" && value !== null && !Array.isArray(value),
    `stdout is a JSON object: ${r.stdout}`,
  );
  return value as Record<string, unknown>;
}

/** A failure: the given exit code, a message on stderr matching `pattern`, nothing on stdout. */
function assertFailure(args: readonly string[], r: CliResult, code: 1 | 2, pattern: RegExp): void {
  assert.equal(r.code, code, describeRun(args, r));
  assert.equal(r.stdout, "", `nothing on stdout: ${describeRun(args, r)}`);
  assert.match(r.stderr, pattern, describeRun(args, r));
}

interface RowCounts {
  tmcs: number;
  companies: number;
  users: number;
  api_users: number;
}

/** Row counts of the storage's tables (the embedded database must not be owned by a server). */
async function countRows(storage: Storage): Promise<RowCounts & { limits: Record<string, number> }> {
  const database = openStorageDatabase(storage);
  try {
    const count = async (table: string) => toCount((await database.db(table).count({ n: "*" }).first())?.n);
    const tmcs = (await database.db("tmcs").select("id", "max_api_users")) as Array<{
      id: string;
      max_api_users: number;
    }>;
    return {
      tmcs: await count("tmcs"),
      companies: await count("companies"),
      users: await count("users"),
      api_users: await count("api_users"),
      limits: Object.fromEntries(tmcs.map((t) => [t.id, t.max_api_users])),
    };
  } finally {
    await database.close();
  }
}

describe(`operator CLI (${backend})`, () => {
  describe("with a server running", () => {
    let storage: Storage;
    let server: ServerProcess;
    let env: Record<string, string>;
    const cli = async (args: readonly string[], extra: Record<string, string> = {}) =>
      runCli(args, { ...env, ...extra });
    const cliJson = async (args: readonly string[]) => jsonOf(args, await cli(args));

    /** How many requests for an OperatorService RPC the server has logged. */
    const requestsTo = (rpc: string) =>
      server
        .logLines()
        .filter(
          (line) =>
            line.msg === "request completed" &&
            (line.req as { url?: string } | undefined)?.url === `/travel.operator.v1.OperatorService/${rpc}`,
        ).length;

    /**
     * Runs `action` and asserts the server received `count` more requests for `rpc` meanwhile:
     * on Postgres an offline fallback would succeed just the same, so the server's log is the proof.
     */
    async function viaServer<T>(rpc: string, count: number, action: () => Promise<T>): Promise<T> {
      const before = requestsTo(rpc);
      const result = await action();
      // The server logs a request before answering it; allow for the log pipe being read late.
      for (let waited = 0; requestsTo(rpc) < before + count && waited < 5_000; waited += 25) await sleep(25);
      assert.equal(requestsTo(rpc) - before, count, `the server received ${count} ${rpc} request(s)`);
      return result;
    }

    // What the successful commands below create, checked against the rows at the end.
    let tmcId = "";
    let otherTmcId = "";
    let orgId = "";
    let email = "";
    let stoppedOnPurpose = false;

    before(async () => {
      storage = newStorage();
      server = await spawnServer(serviceEnv(storage));
      env = serviceEnv(storage, { SERVER_URL: server.address });
    });

    afterEach(() => {
      // Every command here must have found the server; if it died, say why.
      if (server && !stoppedOnPurpose && (server.child.exitCode !== null || server.child.signalCode !== null)) {
        assert.fail(
          `the server exited (${server.child.exitCode ?? server.child.signalCode})\nstdout tail:\n${server.stdout().slice(-3000)}\nstderr:\n${server.stderr()}`,
        );
      }
    });

    after(async () => {
      try {
        await server?.stop(5_000);
      } finally {
        if (storage) await dropStorage(storage);
      }
    });

    it("tmc create: default limit 5, or --max-api-users", async () => {
      const [plain, limited] = await viaServer("CreateTmc", 2, () =>
        Promise.all([
          cliJson(["tmc", "create", "--name", "Acme Travel"]),
          cliJson(["tmc", "create", "--name", "Other Travel", "--max-api-users", "7"]),
        ]),
      );
      assert.match(String(plain.tmcId), UUID);
      assert.deepEqual(plain, { tmcId: plain.tmcId, name: "Acme Travel", maxApiUsers: 5 });
      assert.match(String(limited.tmcId), UUID);
      assert.deepEqual(limited, { tmcId: limited.tmcId, name: "Other Travel", maxApiUsers: 7 });
      assert.notEqual(plain.tmcId, limited.tmcId);
      tmcId = String(plain.tmcId);
      otherTmcId = String(limited.tmcId);
    });

    it("tmc set-limit", async () => {
      const json = await viaServer("SetTmcApiUserLimit", 1, () =>
        cliJson(["tmc", "set-limit", "--tmc-id", tmcId, "--max-api-users", "9"]),
      );
      assert.deepEqual(json, { tmcId, name: "Acme Travel", maxApiUsers: 9 });
    });

    it("company create", async () => {
      const json = await viaServer("CreateCompany", 1, () =>
        cliJson(["company", "create", "--tmc-id", tmcId, "--name", "Globex"]),
      );
      assert.match(String(json.orgId), UUID);
      assert.deepEqual(json, { orgId: json.orgId, tmcId, name: "Globex" });
      orgId = String(json.orgId);
    });

    it("user create: active by default, inactive with --inactive", async () => {
      email = `ada.${crypto.randomUUID().slice(0, 8)}@globex.example`;
      const base = ["user", "create", "--org-id", orgId, "--given-name", "Ada", "--family-name", "Lovelace"];
      const [active, inactive] = await viaServer("CreateUser", 2, () =>
        Promise.all([
          cliJson([...base, "--email", email]),
          cliJson([...base, "--email", `grace.${email}`, "--inactive"]),
        ]),
      );
      assert.match(String(active.userId), UUID);
      assert.deepEqual(active, { userId: active.userId, orgId, tmcId, email, isActive: true });
      assert.match(String(inactive.userId), UUID);
      assert.deepEqual(inactive, { userId: inactive.userId, orgId, tmcId, email: `grace.${email}`, isActive: false });
      assert.notEqual(active.userId, inactive.userId);
    });

    it("api-user create: client credentials by default; a SCIM token for a COMPANY_ADMIN", async () => {
      const [plain, scim] = await viaServer("CreateApiUser", 2, () =>
        Promise.all([
          cliJson(["api-user", "create", "--tmc-id", tmcId]),
          cliJson([
            "api-user",
            "create",
            "--tmc-id",
            tmcId,
            "--org-id",
            orgId,
            "--role",
            "COMPANY_ADMIN",
            "--credential-type",
            "SCIM_TOKEN",
          ]),
        ]),
      );
      assert.deepEqual(Object.keys(plain).sort(), ["clientId", "clientSecret"]);
      assert.ok(typeof plain.clientId === "string" && plain.clientId.length > 0);
      assert.ok(typeof plain.clientSecret === "string" && plain.clientSecret.length >= 32);

      assert.deepEqual(Object.keys(scim).sort(), ["clientId", "scimToken"]);
      assert.ok(typeof scim.clientId === "string" && scim.clientId.length > 0);
      assert.notEqual(scim.clientId, plain.clientId);
      const token = String(scim.scimToken);
      assert.match(token, /^[A-Za-z0-9+/]+={0,2}$/, "the SCIM token is base64");
      const envelope = JSON.parse(Buffer.from(token, "base64").toString("utf8")) as Record<string, unknown>;
      assert.equal(envelope.scope, "scim");
      assert.equal(envelope.clientId, scim.clientId);
      assert.equal(typeof envelope.encryptedSecret, "string");
    });

    it("seed", async () => {
      const json = await viaServer("Seed", 1, () => cliJson(["seed"]));
      assert.deepEqual(Object.keys(json).sort(), [
        "airCreditCount",
        "clientId",
        "clientSecret",
        "orgId",
        "tmcId",
        "userIds",
      ]);
      assert.match(String(json.tmcId), UUID);
      assert.match(String(json.orgId), UUID);
      assert.ok(Array.isArray(json.userIds) && json.userIds.length === 3);
      for (const id of json.userIds as unknown[]) assert.match(String(id), UUID);
      assert.equal(new Set(json.userIds as unknown[]).size, 3);
      assert.ok(typeof json.clientId === "string" && json.clientId.length > 0);
      assert.ok(typeof json.clientSecret === "string" && json.clientSecret.length > 0);
      assert.equal(json.airCreditCount, 13);
    });

    it("migrate applies nothing: the server already migrated", async () => {
      assert.deepEqual(await viaServer("Migrate", 1, () => cliJson(["migrate"])), { applied: [] });
    });

    it("wrong arguments: exit 2, a message on stderr, nothing on stdout", async () => {
      const cases: Array<[args: string[], stderr: RegExp]> = [
        [[], /a command is required/],
        [["frobnicate"], /unknown command "frobnicate"/],
        [["tmc", "create", "--name", "Colourful", "--colour", "red"], /--colour/],
        [["company", "create", "--tmc-id", tmcId], /--name is required/],
        [["company", "create", "--tmc-id", tmcId, "--name", ""], /--name is required/],
        [["tmc", "create", "--name", "Lettered", "--max-api-users", "abc"], /--max-api-users must be a whole number/],
        [["tmc", "set-limit", "--tmc-id", tmcId, "--max-api-users", "200000"], /--max-api-users/],
        [["api-user", "create", "--tmc-id", tmcId, "--role", "BOSS"], /--role must be one of TMC_ADMIN, COMPANY_ADMIN/],
        [["company", "create", "--tmc-id", "not-a-uuid", "--name", "Initech"], /--tmc-id\b.*UUID/i],
        [
          ["user", "create", "--org-id", orgId, "--email", "not-an-email", "--given-name", "G", "--family-name", "F"],
          /--email/,
        ],
        // Valid arguments the server rejects as invalid are usage errors too.
        [
          ["api-user", "create", "--tmc-id", tmcId, "--credential-type", "SCIM_TOKEN"],
          /SCIM_TOKEN requires role COMPANY_ADMIN.*API_VALIDATION_FAILED/,
        ],
      ];
      // Only the last case gets as far as the server; the others fail before sending anything.
      const results = await viaServer("CreateApiUser", 1, () => runAll(cases, 3, ([args]) => cli(args)));
      cases.forEach(([args, pattern], i) => assertFailure(args, results[i]!, 2, pattern));
      // The server-side rejection carries the request's debug identifier: it went through the server.
      assert.match(results[results.length - 1]!.stderr, /debugIdentifier [0-9a-f-]{36}/);
    });

    it("user create with an email already used in the TMC: exit 1, ALREADY_EXISTS", async () => {
      const args = [
        "user",
        "create",
        "--org-id",
        orgId,
        "--email",
        email,
        "--given-name",
        "Ada",
        "--family-name",
        "Again",
      ];
      assertFailure(args, await viaServer("CreateUser", 1, () => cli(args)), 1, /ALREADY_EXISTS/);
    });

    it("tmc set-limit on an unknown TMC: exit 1, NOT_FOUND", async () => {
      const args = ["tmc", "set-limit", "--tmc-id", crypto.randomUUID(), "--max-api-users", "3"];
      assertFailure(args, await viaServer("SetTmcApiUserLimit", 1, () => cli(args)), 1, /NOT_FOUND/);
    });

    it("a wrong operator token: exit 1, USER_NOT_AUTHENTICATED", async () => {
      const args = ["tmc", "create", "--name", "Intruder Travel"];
      const r = await viaServer("CreateTmc", 1, () => cli(args, { OPERATOR_TOKEN: "not-the-operator-token" }));
      assertFailure(args, r, 1, /USER_NOT_AUTHENTICATED/);
    });

    it(
      "embedded: an offline run refuses the DATA_DIR the server owns",
      { skip: isPostgres && "embedded backend only" },
      async () => {
        const args = ["tmc", "create", "--name", "Busy Travel"];
        const r = await viaServer("CreateTmc", 0, () => cli(args, { SERVER_URL: NO_SERVER }));
        assertFailure(args, r, 1, new RegExp(`is in use by process ${server.child.pid}`));
        // The server still owns the directory and its database still answers.
        assert.equal(fs.readFileSync(path.join(storage.dataDir, "owner.pid"), "utf8"), String(server.child.pid));
        const ready = await fetch(`${server.address}/readyz`);
        assert.equal(ready.status, 200, await ready.text());
      },
    );

    it("rejected commands wrote nothing: exactly the rows of the successful ones exist", async () => {
      // The embedded database can only be opened once the server has released it.
      if (!isPostgres) {
        stoppedOnPurpose = true;
        assert.deepEqual(await server.stop(10_000), { code: 0, signal: null });
      }
      const rows = await countRows(storage);
      assert.deepEqual(
        { tmcs: rows.tmcs, companies: rows.companies, users: rows.users, api_users: rows.api_users },
        // Acme + Other + the seed's TMC; Globex + the seed's company; 2 users + the seed's 3;
        // client-credentials + SCIM + the seed's TMC admin.
        { tmcs: 3, companies: 2, users: 5, api_users: 3 },
      );
      assert.equal(rows.limits[tmcId], 9, "the rejected set-limit left the limit as set");
      assert.equal(rows.limits[otherTmcId], 7);
    });
  });

  describe("offline: no server answers at SERVER_URL", () => {
    let storage: Storage;
    let env: Record<string, string>;

    before(() => {
      storage = newStorage();
      env = serviceEnv(storage, { SERVER_URL: NO_SERVER });
    });

    after(async () => {
      if (storage) await dropStorage(storage);
    });

    it("migrate applies the migrations on fresh storage, then nothing; tmc create works", async () => {
      // Fresh storage: --init creates the store (an offline run refuses an empty DATA_DIR without it).
      const first = jsonOf(["migrate", "--init"], await runCli(["migrate", "--init"], env));
      assert.deepEqual(Object.keys(first), ["applied"]);
      assert.ok(Array.isArray(first.applied) && first.applied.length > 0, `applied: ${JSON.stringify(first.applied)}`);
      for (const name of first.applied as unknown[]) assert.equal(typeof name, "string");

      assert.deepEqual(jsonOf(["migrate"], await runCli(["migrate"], env)), { applied: [] });

      const args = ["tmc", "create", "--name", "Offline Travel"];
      const tmc = jsonOf(args, await runCli(args, env));
      assert.match(String(tmc.tmcId), UUID);
      assert.deepEqual(tmc, { tmcId: tmc.tmcId, name: "Offline Travel", maxApiUsers: 5 });

      if (!isPostgres) {
        assert.ok(
          !fs.existsSync(path.join(storage.dataDir, "owner.pid")),
          "an offline run releases DATA_DIR when done",
        );
      }
      const rows = await countRows(storage);
      assert.equal(rows.tmcs, 1);
      assert.equal(rows.limits[String(tmc.tmcId)], 5);
    });
  });
});
