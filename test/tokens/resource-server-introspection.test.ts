// A resource server (a platform service the operator registered with the
// audiences it serves) introspects the tokens addressed to it, over REST (RFC 7662, form or
// HTTP Basic) and gRPC, one by one or in batches (IntrospectTokens), across TMCs; any other
// token is {"active": false}. Two instances on one Postgres and Redis: what A changes, B answers
// at once.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { AuthService } from "../../gen/travel/auth/v2/auth_pb.js";
import { isPostgres, newStorage, TEST_OPERATOR_TOKEN, type Storage } from "../helpers/backend.js";
import { grpcJsUnary, jsonGrpcClient, type GenericGrpcClient } from "../helpers/grpc-js.js";
import { operatorCall, type RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  basicAuthorization,
  disposeService,
  GRANT_EXCHANGE,
  INTROSPECT_PATH,
  ISSUER,
  newApiUser,
  newTenant,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  TYPE_ACCESS_TOKEN,
  type Client,
  type HttpReply,
  type Tenant,
  registerResourceServer,
  type ResourceServerCredential,
} from "../helpers/token-kit.js";

const BOOKINGS = "https://bookings.platform.test/api";
const INVOICES = "https://invoices.platform.test/api";

/** POST /v2/auth/introspect as the resource server, with HTTP Basic (or its form fields). */
const introspectRest = (baseUrl: string, server: ResourceServerCredential, token: string, basic = true) =>
  basic
    ? postForm(
        baseUrl,
        INTROSPECT_PATH,
        { token },
        {
          authorization: basicAuthorization(server.clientId, server.clientSecret),
        },
      )
    : postForm(baseUrl, INTROSPECT_PATH, { token, client_id: server.clientId, client_secret: server.clientSecret });

const introspectGrpc = (client: GenericGrpcClient, server: ResourceServerCredential, token: string) =>
  grpcJsUnary(client, "IntrospectToken", { token, client_id: server.clientId, client_secret: server.clientSecret });

const introspectBatch = (client: GenericGrpcClient, credential: Client | ResourceServerCredential, tokens: string[]) =>
  grpcJsUnary<unknown, { results?: Array<Record<string, unknown>> }>(client, "IntrospectTokens", {
    tokens,
    client_id: credential.clientId,
    client_secret: credential.clientSecret,
  });

const tokenFor = (baseUrl: string, client: Client, audience?: string) =>
  accessTokenOf(baseUrl, client, audience ? { resource: audience } : {});

function assertInactive(reply: HttpReply, what: string): void {
  assert.equal(reply.status, 200, `${what}: ${JSON.stringify(reply.body)}`);
  assert.deepEqual(reply.body, { active: false }, `${what}: only "active": false, no hint why`);
  assert.equal(reply.headers.get("cache-control"), "no-store");
}

describe("introspection by a resource server (RFC 7662 section 4)", () => {
  let running: RunningService;
  let baseUrl: string;
  let tmcA: Tenant;
  let tmcB: Tenant;
  let bookings: ResourceServerCredential;
  let grpc: GenericGrpcClient;
  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    baseUrl = running.baseUrl;
    [tmcA, tmcB] = await Promise.all([newTenant(baseUrl), newTenant(baseUrl)]);
    bookings = await registerResourceServer(baseUrl, "Bookings", [BOOKINGS]);
    await registerResourceServer(baseUrl, "Invoices", [INVOICES]);
    grpc = jsonGrpcClient(AuthService, new URL(baseUrl).host);
  });
  after(async () => {
    grpc?.close();
    await disposeService(running);
  });

  test("a token addressed to one of its audiences is active whatever its TMC, with what a resource server needs to authorize; Basic and form alike", async () => {
    const companyAdmin = await newApiUser(baseUrl, tmcA.tmcId, "COMPANY_ADMIN", tmcA.orgId);
    for (const [client, tmc, role, orgId] of [
      [tmcA.admin, tmcA, "TMC_ADMIN", undefined],
      [tmcB.admin, tmcB, "TMC_ADMIN", undefined],
      [companyAdmin, tmcA, "COMPANY_ADMIN", tmcA.orgId],
    ] as const) {
      const token = await tokenFor(baseUrl, client, BOOKINGS);
      for (const basic of [true, false]) {
        const reply = await introspectRest(baseUrl, bookings, token, basic);
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        assert.equal(reply.headers.get("cache-control"), "no-store");
        const { exp, iat, jti, scope, ...rest } = reply.body as Record<string, unknown>;
        assert.deepEqual(rest, {
          active: true,
          client_id: client.clientId,
          sub: client.clientId,
          aud: [BOOKINGS],
          iss: ISSUER,
          token_type: "Bearer",
          tmc_id: tmc.tmcId,
          role,
          ...(orgId ? { org_id: orgId } : {}),
        });
        assert.equal(typeof scope, "string");
        assert.ok((scope as string).length > 0);
        assert.ok(Number.isInteger(exp) && Number.isInteger(iat) && (exp as number) > (iat as number));
        assert.equal(typeof jti, "string");
      }
    }
  });

  test("any other token is inactive with no hint why: another audience, the service's own, malformed, forged", async () => {
    const own = await tokenFor(baseUrl, tmcA.admin);
    const invoices = await tokenFor(baseUrl, tmcA.admin, INVOICES);
    const bookingsToken = await tokenFor(baseUrl, tmcA.admin, BOOKINGS);
    const forged = `${bookingsToken.slice(0, -6)}AAAAAA`;
    for (const [token, what] of [
      [own, "the service's own audience"],
      [invoices, "another resource server's audience"],
      ["not-a-token", "malformed"],
      [forged, "a forged signature"],
    ] as const)
      assertInactive(await introspectRest(baseUrl, bookings, token), what);
  });

  test("an exchanged token carries its acting party (act), nested as RFC 8693 4.1 writes it", async () => {
    const actor = await newApiUser(baseUrl, tmcA.tmcId, "TMC_ADMIN");
    const subjectToken = await tokenFor(baseUrl, tmcA.admin, BOOKINGS);
    const exchanged = await postForm(baseUrl, TOKEN_PATH, {
      grant_type: GRANT_EXCHANGE,
      client_id: actor.clientId,
      client_secret: actor.clientSecret,
      subject_token: subjectToken,
      subject_token_type: TYPE_ACCESS_TOKEN,
    });
    assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
    const reply = await introspectRest(baseUrl, bookings, exchanged.body.access_token as string);
    assert.equal(reply.body.active, true);
    assert.equal(reply.body.sub, tmcA.admin.clientId, "the subject stays the subject");
    assert.equal(reply.body.client_id, actor.clientId);
    assert.deepEqual(reply.body.act, { sub: actor.clientId });
  });

  test("REST and gRPC give identical answers", async () => {
    const tokens = [await tokenFor(baseUrl, tmcB.admin, BOOKINGS), await tokenFor(baseUrl, tmcB.admin), "junk"];
    for (const token of tokens) {
      const rest = await introspectRest(baseUrl, bookings, token);
      const grpcAnswer = await introspectGrpc(grpc, bookings, token);
      assert.equal(grpcAnswer.code, 0, grpcAnswer.details);
      const defaults = { active: false };
      assert.deepEqual({ ...defaults, ...grpcAnswer.response }, rest.body);
    }
  });

  test("IntrospectTokens: up to 100 tokens answered in order, each as IntrospectToken answers it; resource servers only", async () => {
    const good = await tokenFor(baseUrl, tmcA.admin, BOOKINGS);
    const other = await tokenFor(baseUrl, tmcB.admin, BOOKINGS);
    const own = await tokenFor(baseUrl, tmcA.admin);
    const tokens = [good, own, "junk", other, good];
    const batch = await introspectBatch(grpc, bookings, tokens);
    assert.equal(batch.code, 0, batch.details);
    const results = batch.response?.results ?? [];
    assert.deepEqual(
      results.map((r) => [r.active ?? false, r.client_id ?? r.clientId]),
      [
        [true, tmcA.admin.clientId],
        [false, undefined],
        [false, undefined],
        [true, tmcB.admin.clientId],
        [true, tmcA.admin.clientId],
      ],
    );
    for (const [i, token] of tokens.entries()) {
      const single = await introspectGrpc(grpc, bookings, token);
      assert.deepEqual(results[i], single.response, `token ${i} answered as IntrospectToken answers it`);
    }

    const byApiUser = await introspectBatch(grpc, tmcA.admin, [good]);
    assert.equal(byApiUser.code, 7, "PERMISSION_DENIED for an API user");
    assert.equal(byApiUser.errorResponse?.errorMessages[0]?.errorCode, "UNAUTHORIZED_CLIENT");
    const tooMany = await introspectBatch(
      grpc,
      bookings,
      Array.from({ length: 101 }, () => good),
    );
    assert.equal(tooMany.code, 3, "INVALID_ARGUMENT for 101 tokens");
    const none = await introspectBatch(grpc, bookings, []);
    assert.equal(none.code, 3, "INVALID_ARGUMENT for no token");
  });

  test("a wrong secret, an unknown or a removed server → 401 invalid_client with a Basic challenge; a rotated secret is refused at once", async () => {
    const token = await tokenFor(baseUrl, tmcA.admin, BOOKINGS);
    const removed = await registerResourceServer(baseUrl, "Gone", ["https://gone.platform.test/"]);
    await operatorCall(baseUrl, "RemoveResourceServer", { clientId: removed.clientId });
    for (const [credential, what] of [
      [{ ...bookings, clientSecret: `${bookings.clientSecret}x` }, "a wrong secret"],
      [{ clientId: "rs-aaaaaaaaaaaaaaaaaaaaaaaaaa", clientSecret: bookings.clientSecret }, "an unknown server"],
      [removed, "a removed server"],
    ] as const) {
      const reply = await introspectRest(baseUrl, credential, token);
      assert.equal(reply.status, 401, `${what}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.error, "invalid_client", what);
      assert.equal(reply.headers.get("www-authenticate"), 'Basic realm="token"', what);
      const overGrpc = await introspectGrpc(grpc, credential, token);
      assert.equal(overGrpc.code, 16, `${what} over gRPC: UNAUTHENTICATED`);
    }
    const rotated = await operatorCall<ResourceServerCredential>(baseUrl, "RotateResourceServerSecret", {
      clientId: bookings.clientId,
    });
    assert.equal((await introspectRest(baseUrl, bookings, token)).status, 401, "the old secret is dead at once");
    bookings = { clientId: bookings.clientId, clientSecret: rotated.clientSecret };
    assert.equal((await introspectRest(baseUrl, bookings, token)).body.active, true, "the new one works");
  });

  test("buf curl, through reflection as an operator runs it: register a resource server, batch-introspect with it, list, rotate and remove it", async () => {
    const bufCurl = async (authorization: string, path: string, body: object) => {
      const { stdout } = await promisify(execFile)(
        fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url)),
        [
          "curl",
          "--http2-prior-knowledge",
          "--protocol",
          "grpc",
          "-H",
          `Authorization: ${authorization}`,
          "-d",
          JSON.stringify(body),
          `${baseUrl}/${path}`,
        ],
        { timeout: 30_000 },
      );
      return JSON.parse(stdout) as Record<string, any>;
    };
    const operator = `Bearer ${TEST_OPERATOR_TOKEN}`;
    const created = await bufCurl(operator, "travel.operator.v1.OperatorService/CreateResourceServer", {
      name: "Reflected",
      audiences: ["https://reflected.platform.test/api"],
    });
    assert.match(created.clientId, /^rs-/);
    const token = await tokenFor(baseUrl, tmcA.admin, "https://reflected.platform.test/api");
    const asServer = basicAuthorization(created.clientId, created.clientSecret);
    const batch = await bufCurl(asServer, "travel.auth.v2.AuthService/IntrospectTokens", { tokens: [token, "junk"] });
    assert.equal(batch.results[0].active, true);
    assert.equal(batch.results[0].client_id, tmcA.admin.clientId);
    assert.deepEqual(batch.results[1], { active: false });
    const listed = await bufCurl(operator, "travel.operator.v1.OperatorService/ListResourceServers", {});
    const entry = listed.resourceServers.find((r: { clientId: string }) => r.clientId === created.clientId);
    assert.deepEqual(entry.audiences, ["https://reflected.platform.test/api"]);
    assert.equal(JSON.stringify(listed).includes(created.clientSecret), false, "never the secret");
    const rotated = await bufCurl(operator, "travel.operator.v1.OperatorService/RotateResourceServerSecret", {
      clientId: created.clientId,
    });
    assert.notEqual(rotated.clientSecret, created.clientSecret);
    await bufCurl(operator, "travel.operator.v1.OperatorService/RemoveResourceServer", { clientId: created.clientId });
    assert.equal(
      (await introspectRest(baseUrl, { clientId: created.clientId, clientSecret: rotated.clientSecret }, token)).status,
      401,
    );
  });

  test("refusals are audited in the platform's trail (no TMC); answers are counted per resource server", async () => {
    const token = await tokenFor(baseUrl, tmcA.admin, BOOKINGS);
    const refused = await introspectRest(baseUrl, { ...bookings, clientSecret: "wrong" }, token);
    assert.equal(refused.status, 401);
    const debugIdentifier = refused.body.debugIdentifier as string;
    let events: Array<Record<string, any>> = [];
    for (let i = 0; i < 50 && !events.some((e) => e.debugIdentifier === debugIdentifier); i++) {
      await new Promise((r) => setTimeout(r, 100)); // the audit trail is written off the request path
      events =
        (
          await operatorCall<{ events?: Array<Record<string, any>> }>(baseUrl, "ListAuditEvents", {
            platform: true,
            actions: ["TOKEN_INTROSPECTION_REFUSED"],
          })
        ).events ?? [];
    }
    const event = events.find((e) => e.debugIdentifier === debugIdentifier);
    assert.ok(event, "a TOKEN_INTROSPECTION_REFUSED event with the answer's debugIdentifier");
    assert.equal(event.actor, bookings.clientId);
    assert.equal(JSON.stringify(event).includes("wrong"), false, "never the presented secret");
    await introspectRest(baseUrl, bookings, token);
    const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(`resource_server_introspections_total\\{resource_server="${bookings.clientId}",active="true"\\} \\d+`),
    );
  });
});

describe("a resource server's own budget (RESOURCE_SERVER_RATE_LIMIT), counted apart from API users'", () => {
  let running: RunningService;
  before(async () => {
    running = await startTokenService({
      env: {
        TOKEN_RATE_LIMIT_PER_CLIENT: "3/60",
        TOKEN_RATE_LIMIT_PER_ADDRESS: "4/60",
        RESOURCE_SERVER_RATE_LIMIT: "6/60",
      },
    });
  });
  after(() => disposeService(running));

  test("a gateway is not held to an API user's token budget, nor an API user to a gateway's; each stops at its own with 429 and Retry-After", async () => {
    const baseUrl = running.baseUrl;
    const tenant = await newTenant(baseUrl);
    const server = await registerResourceServer(baseUrl, "Budgeted", [BOOKINGS]);
    const token = await tokenFor(baseUrl, tenant.admin, BOOKINGS);
    const issued = [];
    for (let i = 0; i < 3; i++)
      issued.push(
        (
          await postForm(baseUrl, TOKEN_PATH, {
            grant_type: "client_credentials",
            client_id: tenant.admin.clientId,
            client_secret: tenant.admin.clientSecret,
          })
        ).status,
      );
    assert.deepEqual(issued, [200, 200, 429], "the API user's 3 per minute: the token above and two more");
    const statuses = [];
    for (let i = 0; i < 7; i++) statuses.push(await introspectRest(baseUrl, server, token));
    assert.deepEqual(
      statuses.map((r) => r.status),
      [200, 200, 200, 200, 200, 200, 429],
      "the resource server's own 6 per minute, though the address's token budget (4) is spent",
    );
    assert.ok(Number(statuses[6]!.headers.get("retry-after")) >= 1);
    assert.equal(statuses[6]!.body.error, "slow_down");
  });
});

describe(
  "introspection by a resource server across two instances",
  { skip: !isPostgres && "needs a shared Postgres and Redis" },
  () => {
    let storage: Storage;
    let a: RunningService;
    let b: RunningService;
    let grpcA: GenericGrpcClient;
    let grpcB: GenericGrpcClient;
    before(async () => {
      storage = newStorage();
      a = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
      b = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
      grpcA = jsonGrpcClient(AuthService, new URL(a.baseUrl).host);
      grpcB = jsonGrpcClient(AuthService, new URL(b.baseUrl).host);
    });
    after(async () => {
      grpcA?.close();
      grpcB?.close();
      await Promise.all([a?.stop(), b?.stop()]);
      if (storage) await (await import("../helpers/service.js")).dropStorage(storage);
    });

    test("issued on A, active on B; the API user rotated on A → inactive on B before the rotate call returns; another audience inactive; REST and gRPC alike", async () => {
      const tenant = await newTenant(a.baseUrl);
      const client = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
      const server = await registerResourceServer(a.baseUrl, "Bookings on two", [BOOKINGS]);
      const token = await tokenFor(a.baseUrl, client, BOOKINGS);
      const own = await tokenFor(a.baseUrl, client);
      assert.equal((await introspectRest(b.baseUrl, server, token)).body.active, true, "A's token is active on B");
      assert.equal((await introspectGrpc(grpcB, server, token)).response?.active, true, "over gRPC too");
      assertInactive(await introspectRest(b.baseUrl, server, own), "a token for the service's own audience");

      const adminToken = await accessTokenOf(a.baseUrl, tenant.admin);
      const rotated = await fetch(`${a.baseUrl}/v2/api-users/rotate`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
        body: JSON.stringify({ clientId: client.clientId }),
      });
      assert.equal(rotated.status, 200);
      assertInactive(await introspectRest(b.baseUrl, server, token), "after rotation on A, on B");
      const overGrpc = await introspectGrpc(grpcB, server, token);
      assert.equal(overGrpc.code, 0);
      assert.notEqual(overGrpc.response?.active, true, "and over gRPC on B");
      const batch = await introspectBatch(grpcB, server, [token]);
      assert.notEqual(batch.response?.results?.[0]?.active, true, "and in a batch on B");
    });

    test("a resource server removed on A is refused (401) on A and B, over REST and gRPC", async () => {
      const tenant = await newTenant(a.baseUrl);
      const server = await registerResourceServer(a.baseUrl, "Short-lived", ["https://short.platform.test/"]);
      const token = await tokenFor(a.baseUrl, tenant.admin, "https://short.platform.test/");
      assert.equal((await introspectRest(b.baseUrl, server, token)).body.active, true, "B holds it first");
      await operatorCall(a.baseUrl, "RemoveResourceServer", { clientId: server.clientId });
      for (const running of [a, b]) {
        const reply = await introspectRest(running.baseUrl, server, token);
        assert.equal(reply.status, 401, JSON.stringify(reply.body));
        assert.equal(reply.body.error, "invalid_client");
      }
      for (const client of [grpcA, grpcB]) assert.equal((await introspectGrpc(client, server, token)).code, 16);
    });
  },
);
