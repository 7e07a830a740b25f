import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import { cliAgainstServer, type Run } from "./cli-against-server.js";

const version = (JSON.parse(fs.readFileSync("package.json", "utf8")) as { version: string }).version;
let cli: (...args: string[]) => Promise<Run>;

const show = (args: readonly string[], r: Run) =>
  `cli ${args.join(" ")} → exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(0, 2000)}`;

/** Exit 0 and one JSON object on stdout. */
async function json(...args: string[]): Promise<Record<string, any>> {
  const r = await cli(...args);
  assert.equal(r.code, 0, show(args, r));
  return JSON.parse(r.stdout) as Record<string, any>;
}

/** Exit 2 (wrong arguments): the message on stderr, then the usage; nothing on stdout. */
async function usageError(args: string[], pattern: RegExp): Promise<Run> {
  const r = await cli(...args);
  assert.equal(r.code, 2, show(args, r));
  assert.equal(r.stdout, "", show(args, r));
  assert.match(r.stderr, pattern, show(args, r));
  assert.match(r.stderr, /Usage: cli/, `the usage follows the message: ${show(args, r)}`);
  return r;
}

describe("CLI: help, version, suggestions, --output table and the operator's lists", { timeout: 600_000 }, () => {
  cli = cliAgainstServer();

  test("--help on stdout with exit 0 at every level; --version prints package.json's version", async () => {
    const [top, short, group, leaf, versionRun] = await Promise.all([
      cli("--help"),
      cli("-h"),
      cli("tmc", "--help"),
      cli("tmc", "create", "--help"),
      cli("--version"),
    ]);
    for (const [args, r] of [
      [["--help"], top],
      [["-h"], short],
      [["tmc", "--help"], group],
      [["tmc", "create", "--help"], leaf],
    ] as const) {
      assert.equal(r.code, 0, show(args, r));
      assert.equal(r.stderr, "", show(args, r));
      assert.match(r.stdout, /^Usage: cli/, show(args, r));
    }
    for (const command of [
      "tmc",
      "company",
      "user",
      "api-user",
      "audit",
      "keys",
      "trusted-issuer",
      "resource-server",
      "lockout",
      "credits",
      "seed",
      "migrate",
    ]) {
      assert.match(top.stdout, new RegExp(`^  ${command}\\b`, "m"), `${command} in the top-level help`);
    }
    for (const command of ["create", "set-limit", "list", "get"])
      assert.match(group.stdout, new RegExp(`^  ${command}\\b`, "m"));
    assert.match(leaf.stdout, /--name <NAME>/);
    assert.match(leaf.stdout, /--max-api-users <N>/);
    assert.match(leaf.stdout, /--output <format>/);
    assert.deepEqual([versionRun.code, versionRun.stdout, versionRun.stderr], [0, `${version}\n`, ""]);
  });

  test("unknown commands and options: exit 2 with the nearest valid one suggested", async () => {
    await Promise.all([
      usageError(["tmx", "list"], /unknown command "tmx"[\s\S]*Did you mean tmc\?/),
      usageError(["tmc", "lst"], /unknown command "lst"[\s\S]*Did you mean list\?/),
      usageError(["tmc", "create", "--nam", "X"], /unknown option "--nam"[\s\S]*Did you mean --name\?/),
      usageError(["tmc"], /"tmc" needs a command: create, set-limit, list, get/),
      usageError([], /a command is required/),
      usageError(["tmc", "list", "--output", "xml"], /--output[\s\S]*json, table/),
      usageError(["tmc", "list", "extra"], /too many arguments/),
    ]);
  });

  test("bad arguments of the new commands: exit 2 naming the option, before anything is sent", async () => {
    const tmcId = crypto.randomUUID();
    const cases: Array<[string[], RegExp]> = [
      [["tmc", "get", "--tmc-id", "nope"], /--tmc-id: .*UUID/],
      [["tmc", "get"], /--tmc-id is required for "tmc get"/],
      [["tmc", "list", "--limit", "0"], /--limit: .*1/],
      [["tmc", "list", "--offset", "-1"], /--offset must be a whole number/],
      [["api-user", "list", "--tmc-id", tmcId, "--limit", "1001"], /--limit: /],
      [["api-user", "revoke", "--tmc-id", tmcId], /--client-id is required for "api-user revoke"/],
      [["trusted-issuer", "list", "--tmc-id", "x"], /--tmc-id: .*UUID/],
      [["trusted-issuer", "remove", "--tmc-id", tmcId], /--issuer is required/],
      [["audit", "list", "--tmc-id", tmcId, "--since", "yesterday"], /--since must be an RFC 3339 time/],
      [["audit", "list", "--tmc-id", tmcId, "--until", "2026-13-45"], /--until must be an RFC 3339 time/],
      [["audit", "list", "--tmc-id", tmcId, "--page-token", "abc"], /--page-token: /],
      [["audit", "list", "--tmc-id", tmcId, "--action", ""], /--action must not be empty/],
    ];
    // None of them opens the storage, so they may run side by side.
    for (let i = 0; i < cases.length; i += 4)
      await Promise.all(cases.slice(i, i + 4).map(([args, pattern]) => usageError(args, pattern)));
  });

  test("tmc list and get, api-user list and revoke, trusted-issuer list and remove, audit list with filters and pages", async () => {
    const tmc = await json("tmc", "create", "--name", "Operator Travel", "--max-api-users", "3");
    assert.deepEqual(await json("tmc", "get", "--tmc-id", tmc.tmcId), {
      tmc: { tmcId: tmc.tmcId, name: "Operator Travel", maxApiUsers: 3, activeApiUsers: 0 },
    });
    const first = await json("api-user", "create", "--tmc-id", tmc.tmcId);
    const second = await json("api-user", "create", "--tmc-id", tmc.tmcId);

    const listed = await json("tmc", "list");
    assert.deepEqual(
      listed.tmcs.filter((t: any) => t.tmcId === tmc.tmcId),
      [{ tmcId: tmc.tmcId, name: "Operator Travel", maxApiUsers: 3, activeApiUsers: 2 }],
    );
    assert.equal(listed.totalCount, listed.tmcs.length);

    const table = await cli("tmc", "list", "--output", "table");
    assert.equal(table.code, 0, show(["tmc", "list", "--output", "table"], table));
    const lines = table.stdout.split("\n");
    assert.match(lines[0]!, /^tmcId\s+name\s+maxApiUsers\s+activeApiUsers$/);
    assert.match(lines[1]!, /^-+\s+-+/);
    assert.ok(
      lines.some((l) => l.startsWith(tmc.tmcId) && /Operator Travel\s+3\s+2$/.test(l)),
      table.stdout,
    );
    assert.match(table.stdout, /^totalCount: \d+$/m);

    const users = await json("api-user", "list", "--tmc-id", tmc.tmcId);
    assert.equal(users.totalCount, 2);
    assert.deepEqual(
      users.apiUsers.map((u: any) => [u.clientId, u.role, u.credentialType, u.createdBy, u.lastTokenIssuedAt]),
      [
        [first.clientId, "TMC_ADMIN", "CLIENT_CREDENTIALS", "operator", undefined],
        [second.clientId, "TMC_ADMIN", "CLIENT_CREDENTIALS", "operator", undefined],
      ],
    );
    assert.ok(!Number.isNaN(Date.parse(users.apiUsers[0].createdAt)));
    assert.ok(!JSON.stringify(users).includes(first.clientSecret), "never a secret");
    assert.deepEqual(
      (await json("api-user", "list", "--tmc-id", tmc.tmcId, "--limit", "1", "--offset", "1")).apiUsers.map(
        (u: any) => u.clientId,
      ),
      [second.clientId],
    );

    assert.deepEqual(await json("api-user", "revoke", "--tmc-id", tmc.tmcId, "--client-id", first.clientId), {
      tmcId: tmc.tmcId,
      clientId: first.clientId,
    });
    assert.deepEqual(
      (await json("api-user", "list", "--tmc-id", tmc.tmcId)).apiUsers.map((u: any) => u.clientId),
      [second.clientId],
    );
    const again = await cli("api-user", "revoke", "--tmc-id", tmc.tmcId, "--client-id", first.clientId);
    assert.equal(again.code, 1, again.stderr);
    assert.match(again.stderr, /API user not found \(NOT_FOUND; clientId=/);

    const revokes = await json(
      "audit",
      "list",
      "--tmc-id",
      tmc.tmcId,
      "--action",
      "API_USER_REVOKE",
      "--client-id",
      first.clientId,
    );
    assert.deepEqual(
      revokes.events.map((e: any) => [e.action, e.actor, e.targetClientId]),
      [["API_USER_REVOKE", "operator", first.clientId]],
    );
    const creates = await json(
      "audit",
      "list",
      "--tmc-id",
      tmc.tmcId,
      "--action",
      "API_USER_CREATE,API_USER_REVOKE",
      "--limit",
      "2",
    );
    assert.deepEqual(
      creates.events.map((e: any) => e.action),
      ["API_USER_REVOKE", "API_USER_CREATE"],
    );
    assert.match(creates.nextPageToken, /^\d+$/);
    const older = await json(
      "audit",
      "list",
      "--tmc-id",
      tmc.tmcId,
      "--action",
      "API_USER_CREATE",
      "--action",
      "API_USER_REVOKE",
      "--limit",
      "2",
      "--page-token",
      creates.nextPageToken,
    );
    assert.deepEqual(
      older.events.map((e: any) => [e.action, e.targetClientId]),
      [["API_USER_CREATE", first.clientId]],
    );
    assert.equal(older.nextPageToken, undefined, "the last page has no token");
    assert.deepEqual((await json("audit", "list", "--tmc-id", tmc.tmcId, "--since", "2999-01-01")).events, []);
    assert.equal(
      (await json("audit", "list", "--tmc-id", tmc.tmcId, "--until", "2999-01-01T00:00:00Z")).events.length,
      3,
      "two creates and a revoke",
    );

    const audience = ["--audience", "https://travel.test/token-exchange"];
    await json(
      "trusted-issuer",
      "add",
      "--tmc-id",
      tmc.tmcId,
      "--issuer",
      "https://idp.example",
      "--jwks-uri",
      "https://idp.example/jwks.json",
      ...audience,
    );
    assert.deepEqual(await json("trusted-issuer", "list", "--tmc-id", tmc.tmcId), {
      issuers: [
        {
          issuer: "https://idp.example",
          jwksUri: "https://idp.example/jwks.json",
          inlineJwks: false,
          audience: "https://travel.test/token-exchange",
        },
      ],
    });
    assert.deepEqual(await json("trusted-issuer", "remove", "--tmc-id", tmc.tmcId, "--issuer", "https://idp.example"), {
      tmcId: tmc.tmcId,
      issuer: "https://idp.example",
    });
    assert.deepEqual(await json("trusted-issuer", "list", "--tmc-id", tmc.tmcId), { issuers: [] });
    const gone = await cli("trusted-issuer", "remove", "--tmc-id", tmc.tmcId, "--issuer", "https://idp.example");
    assert.equal(gone.code, 1, gone.stderr);
    assert.match(gone.stderr, /Trusted issuer not found \(NOT_FOUND/);

    const unknown = crypto.randomUUID();
    const missing = await cli("tmc", "get", "--tmc-id", unknown);
    assert.equal(missing.code, 1, missing.stderr);
    assert.match(missing.stderr, new RegExp(`TMC not found \\(NOT_FOUND; tmcId=${unknown}\\)`));
  });
  test("resource-server create, list, get, rotate and remove as the README shows; audit list --platform", async () => {
    const created = await json(
      "resource-server",
      "create",
      "--name",
      "Trips API",
      "--audience",
      "https://trips.example/api",
      "--audience",
      "urn:trips:admin",
    );
    assert.match(created.clientId, /^rs-[a-z2-7]{26}$/);
    assert.match(created.clientSecret, /^[A-Za-z0-9_-]{43}$/, "the secret, shown this once");
    assert.deepEqual(
      [created.name, created.audiences],
      ["Trips API", ["https://trips.example/api", "urn:trips:admin"]],
    );

    const listed = await json("resource-server", "list");
    assert.deepEqual(
      listed.resourceServers
        .filter((s: any) => s.clientId === created.clientId)
        .map((s: any) => [s.name, s.audiences, s.rotatedAt]),
      [["Trips API", ["https://trips.example/api", "urn:trips:admin"], undefined]],
    );
    const table = await cli("resource-server", "list", "--output", "table");
    assert.equal(table.code, 0, show(["resource-server", "list", "--output", "table"], table));
    assert.match(table.stdout, /^clientId\s+name\s+audiences\s+createdAt/);
    assert.ok(
      table.stdout
        .split("\n")
        .some((l) => l.startsWith(created.clientId) && l.includes("https://trips.example/api, urn:trips:admin")),
      table.stdout,
    );
    const got = await json("resource-server", "get", "--client-id", created.clientId);
    assert.equal(got.resourceServer.clientId, created.clientId);
    for (const shown of [listed, got, table.stdout])
      assert.ok(!JSON.stringify(shown).includes(created.clientSecret), "never the secret again");

    const taken = await cli("resource-server", "create", "--name", "Again", "--audience", "urn:trips:admin");
    assert.equal(taken.code, 1, taken.stderr);
    assert.match(
      taken.stderr,
      /An audience is already served by another resource server \(ALREADY_EXISTS; audiences=urn:trips:admin\)/,
    );
    await usageError(
      ["resource-server", "create", "--name", "No audience"],
      /--audience is required for "resource-server create"/,
    );
    await usageError(["resource-server", "create", "--name", "Bad", "--audience", "not a uri"], /--audience: .*URI/);
    // --jwks-uri reaches the service, which checks the URL before it registers anything.
    for (const args of [
      ["resource-server", "create", "--name", "By URL", "--audience", "urn:trips:keys"],
      ["resource-server", "set-keys", "--client-id", created.clientId],
    ]) {
      const byUrl = await cli(...args, "--jwks-uri", "http://keys.example/jwks.json");
      assert.equal(byUrl.code, 2, show(args, byUrl));
      assert.match(
        byUrl.stderr,
        /jwks_uri must use https \(API_VALIDATION_FAILED; jwksUri=invalid\)/,
        show(args, byUrl),
      );
    }

    const rotated = await json("resource-server", "rotate", "--client-id", created.clientId);
    assert.equal(rotated.clientId, created.clientId);
    assert.notEqual(rotated.clientSecret, created.clientSecret);
    assert.deepEqual(await json("resource-server", "remove", "--client-id", created.clientId), {
      clientId: created.clientId,
    });
    const gone = await cli("resource-server", "get", "--client-id", created.clientId);
    assert.equal(gone.code, 1, gone.stderr);
    assert.match(gone.stderr, /Resource server not found \(NOT_FOUND; clientId=rs-/);

    const trail = await json("audit", "list", "--platform", "--client-id", created.clientId);
    assert.deepEqual(
      trail.events.map((e: any) => [e.action, e.actor, e.tmcId]),
      [
        ["RESOURCE_SERVER_REMOVE", "operator", undefined],
        ["RESOURCE_SERVER_ROTATE", "operator", undefined],
        ["RESOURCE_SERVER_CREATE", "operator", undefined],
      ],
    );
    assert.ok(
      !JSON.stringify(trail).includes(created.clientSecret) && !JSON.stringify(trail).includes(rotated.clientSecret),
    );
    const neither = await cli("audit", "list");
    assert.equal(neither.code, 2, neither.stderr);
    assert.match(neither.stderr, /tmcId is required \(or platform, for the events of no TMC\)/);
  });
});
