import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import type { PresentedCredentials } from "../../../src/domain/tokens/model.js";
import { clientCredentialsOf } from "../../../src/domain/shared/client-credentials.js";
import { AUDIENCE, asOperator, asRequest, rejectsWithRpc, startRpc, type RpcHarness } from "./harness.js";

const invalid = (params: Array<{ name: string; value: string }>) =>
  ({
    code: Code.InvalidArgument,
    errorCode: "API_VALIDATION_FAILED",
    message: "The request is invalid",
    params,
  }) as const;

const notFound = (clientId: string) =>
  ({
    code: Code.NotFound,
    errorCode: "NOT_FOUND",
    message: "Resource server not found",
    params: [{ name: "clientId", value: clientId }],
  }) as const;

/** HTTP Basic as a resource server sends it to introspection. */
const basic = (clientId: string, secret: string): PresentedCredentials => ({
  formClientId: "",
  formClientSecret: "",
  authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString("base64")}`,
});
const form = (clientId: string, secret: string): PresentedCredentials => ({
  formClientId: clientId,
  formClientSecret: secret,
  authorization: null,
});

describe("OperatorService: resource servers", () => {
  let h: RpcHarness;
  before(async () => {
    h = await startRpc();
  });
  const authenticate = (presented: PresentedCredentials) =>
    h.domain.resourceServerAuthenticator.authenticate(clientCredentialsOf(presented));
  /** The refusal every failed resource-server authentication gets, whatever failed. */
  const refusedAlike = async (presented: PresentedCredentials) => {
    const error = await authenticate(presented).then(
      () => assert.fail("authenticated"),
      (e: unknown) => e as { code: string; message: string; params: unknown[]; kind: string },
    );
    assert.deepEqual(
      [error.code, error.kind, error.message, error.params],
      ["RESOURCE_SERVER_AUTHENTICATION_FAILED", "UNAUTHENTICATED", "Client authentication failed", []],
    );
  };

  test("create: an rs- client id and a secret shown once; list and get show the server, never the secret", async () => {
    const created = await asRequest("req-rs-create", "10.9.1.1", () =>
      h.operator.createResourceServer(
        { name: "Trips API", audiences: ["https://trips.example/api", "https://trips.example/admin"] },
        asOperator,
      ),
    );
    assert.match(created.clientId, /^rs-[a-z2-7]{26}$/);
    assert.match(created.clientSecret, /^[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(
      [created.name, created.audiences],
      ["Trips API", ["https://trips.example/admin", "https://trips.example/api"]],
    );

    const got = await h.operator.getResourceServer({ clientId: created.clientId }, asOperator);
    assert.deepEqual(
      [
        got.resourceServer?.clientId,
        got.resourceServer?.name,
        got.resourceServer?.audiences,
        got.resourceServer?.rotatedAt,
      ],
      [created.clientId, "Trips API", ["https://trips.example/admin", "https://trips.example/api"], ""],
    );
    assert.ok(!Number.isNaN(Date.parse(got.resourceServer!.createdAt)));
    const listed = await h.operator.listResourceServers({}, asOperator);
    assert.ok(listed.resourceServers.some((s) => s.clientId === created.clientId));
    assert.equal(listed.totalCount, listed.resourceServers.length);
    for (const shown of [JSON.stringify(got), JSON.stringify(listed)])
      assert.ok(!shown.includes(created.clientSecret), "never the secret");
    const stored = (await h.store.db("resource_servers").where({ client_id: created.clientId }).first()) as {
      secret_hash: Buffer;
    };
    assert.ok(!JSON.stringify(stored).includes(created.clientSecret), "stored as its keyed hash only");
    assert.equal(stored.secret_hash.length, 32);

    // Platform events: listed with --platform, not under any TMC; never the secret.
    const trail = await h.operator.listAuditEvents({ platform: true, actions: ["RESOURCE_SERVER_CREATE"] }, asOperator);
    const event = trail.events.find((e) => e.targetClientId === created.clientId)!;
    assert.deepEqual(
      [event.actor, event.tmcId, event.debugIdentifier, event.details],
      [
        "operator",
        "",
        "req-rs-create",
        {
          clientId: created.clientId,
          name: "Trips API",
          audiences: "https://trips.example/admin https://trips.example/api",
        },
      ],
    );
    assert.ok(!JSON.stringify(trail).includes(created.clientSecret));
  });

  test("paging by limit and offset, in creation order", async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      h.clock.advanceSeconds(1);
      made.push(
        (await h.operator.createResourceServer({ name: `Paged ${i}`, audiences: [`urn:paged:${i}`] }, asOperator))
          .clientId,
      );
    }
    const all = await h.operator.listResourceServers({ limit: 1000 }, asOperator);
    const order = all.resourceServers.map((s) => s.clientId).filter((id) => made.includes(id));
    assert.deepEqual(order, made);
    const page = await h.operator.listResourceServers({ limit: 1, offset: all.totalCount - 2 }, asOperator);
    assert.deepEqual([page.resourceServers.map((s) => s.clientId), page.totalCount], [[made[1]], all.totalCount]);
    await rejectsWithRpc(
      h.operator.listResourceServers({ limit: 0, offset: -1 }, asOperator),
      invalid([
        { name: "limit", value: "must be greater than or equal to 1 and less than or equal to 1000" },
        { name: "offset", value: "must be greater than or equal to 0" },
      ]),
    );
  });

  test("validation: each broken rule named in one 400, nothing written", async () => {
    const before = (await h.operator.listResourceServers({}, asOperator)).totalCount;
    await rejectsWithRpc(
      h.operator.createResourceServer({ name: "", audiences: [] }, asOperator),
      invalid([
        { name: "name", value: "must be at least 1 characters" },
        { name: "audiences", value: "must contain at least 1 item(s)" },
      ]),
    );
    await rejectsWithRpc(
      h.operator.createResourceServer(
        { name: "x".repeat(201), audiences: ["not a uri", `https://a.example/${"p".repeat(500)}`] },
        asOperator,
      ),
      invalid([
        { name: "name", value: "must be at most 200 characters" },
        { name: "audiences[0]", value: "must be a valid URI" },
        { name: "audiences[1]", value: "must be at most 512 characters" },
      ]),
    );
    await rejectsWithRpc(
      h.operator.createResourceServer({ name: "Dup", audiences: ["urn:a", "urn:a"] }, asOperator),
      invalid([{ name: "audiences", value: "repeated value must contain unique items" }]),
    );
    await rejectsWithRpc(
      h.operator.createResourceServer(
        { name: "Own", audiences: ["https://fragment.example/api#part", AUDIENCE] },
        asOperator,
      ),
      invalid([
        { name: "audiences[0]", value: "must be an absolute URI without a fragment" },
        { name: "audiences[1]", value: "is this service's own audience (TOKEN_AUDIENCE)" },
      ]),
    );
    await rejectsWithRpc(
      h.operator.createResourceServer(
        { name: "Many", audiences: Array.from({ length: 21 }, (_, i) => `urn:m:${i}`) },
        asOperator,
      ),
      invalid([{ name: "audiences", value: "must contain no more than 20 item(s)" }]),
    );
    assert.equal((await h.operator.listResourceServers({}, asOperator)).totalCount, before);
  });

  test("an audience another resource server serves: 409 ALREADY_EXISTS naming it, nothing written; free again after removal", async () => {
    const first = await h.operator.createResourceServer(
      { name: "Hotels", audiences: ["https://hotels.example/api"] },
      asOperator,
    );
    const before = (await h.operator.listResourceServers({}, asOperator)).totalCount;
    await rejectsWithRpc(
      h.operator.createResourceServer(
        { name: "Hotels too", audiences: ["https://cars.example/api", "https://hotels.example/api"] },
        asOperator,
      ),
      {
        code: Code.AlreadyExists,
        errorCode: "ALREADY_EXISTS",
        message: "An audience is already served by another resource server",
        params: [{ name: "audiences", value: "https://hotels.example/api" }],
      },
    );
    assert.equal((await h.operator.listResourceServers({}, asOperator)).totalCount, before, "no server written");
    assert.deepEqual(
      [
        ...(await h.store.repositories.resourceServers.registeredAudiences(h.store.uow.direct, [
          "https://cars.example/api",
        ])),
      ],
      [],
      "no audience written",
    );

    await h.operator.removeResourceServer({ clientId: first.clientId }, asOperator);
    const again = await h.operator.createResourceServer(
      { name: "Hotels v2", audiences: ["https://hotels.example/api"] },
      asOperator,
    );
    assert.notEqual(again.clientId, first.clientId);
  });

  test("authentication: the right secret (Basic or form) gives the server and its audiences; wrong, unknown, removed and API-user ids are refused alike", async () => {
    const server = await h.operator.createResourceServer(
      { name: "Flights", audiences: ["https://flights.example/api", "urn:flights"] },
      asOperator,
    );
    for (const presented of [basic(server.clientId, server.clientSecret), form(server.clientId, server.clientSecret)]) {
      const authenticated = await authenticate(presented);
      assert.deepEqual(
        [authenticated.clientId, authenticated.name, authenticated.audiences],
        [server.clientId, "Flights", ["https://flights.example/api", "urn:flights"]],
      );
    }
    const { clientId: apiUserId, clientSecret: apiUserSecret } = await h.operator.createApiUser(
      { tmcId: (await h.operator.createTmc({ name: "Any TMC" }, asOperator)).tmcId },
      asOperator,
    );
    await refusedAlike(basic(server.clientId, `${server.clientSecret.slice(0, -1)}x`));
    await refusedAlike(form("rs-unknownunknownunknownunkn", server.clientSecret));
    await refusedAlike(basic(apiUserId, apiUserSecret));
    await refusedAlike(form(apiUserId, apiUserSecret));
    await h.operator.removeResourceServer({ clientId: server.clientId }, asOperator);
    await refusedAlike(basic(server.clientId, server.clientSecret));
  });

  test("rotate: a new secret, the old one refused at once; audited; unknown and removed ids are NOT_FOUND", async () => {
    const server = await h.operator.createResourceServer(
      { name: "Cars", audiences: ["https://cars.example/v1"] },
      asOperator,
    );
    await authenticate(form(server.clientId, server.clientSecret));
    const rotated = await asRequest("req-rs-rotate", "10.9.1.2", () =>
      h.operator.rotateResourceServerSecret({ clientId: server.clientId }, asOperator),
    );
    assert.equal(rotated.clientId, server.clientId);
    assert.notEqual(rotated.clientSecret, server.clientSecret);
    await refusedAlike(form(server.clientId, server.clientSecret));
    assert.equal((await authenticate(form(server.clientId, rotated.clientSecret))).clientId, server.clientId);
    assert.notEqual(
      (await h.operator.getResourceServer({ clientId: server.clientId }, asOperator)).resourceServer?.rotatedAt,
      "",
    );

    const removed = await asRequest("req-rs-remove", "10.9.1.3", () =>
      h.operator.removeResourceServer({ clientId: server.clientId }, asOperator),
    );
    assert.deepEqual(removed.clientId, server.clientId);
    for (const call of [
      h.operator.getResourceServer({ clientId: server.clientId }, asOperator),
      h.operator.rotateResourceServerSecret({ clientId: server.clientId }, asOperator),
      h.operator.removeResourceServer({ clientId: server.clientId }, asOperator),
    ])
      await rejectsWithRpc(call, notFound(server.clientId));
    await rejectsWithRpc(h.operator.getResourceServer({ clientId: "rs-nobody" }, asOperator), notFound("rs-nobody"));
    assert.ok(
      !(await h.operator.listResourceServers({ limit: 1000 }, asOperator)).resourceServers.some(
        (s) => s.clientId === server.clientId,
      ),
      "a removed server is not listed",
    );
    await rejectsWithRpc(
      h.operator.rotateResourceServerSecret({ clientId: "" }, asOperator),
      invalid([{ name: "clientId", value: "must be at least 1 characters" }]),
    );

    const trail = await h.operator.listAuditEvents(
      { platform: true, clientId: server.clientId, actions: ["RESOURCE_SERVER_ROTATE", "RESOURCE_SERVER_REMOVE"] },
      asOperator,
    );
    assert.deepEqual(
      trail.events.map((e) => [e.action, e.actor, e.tmcId, e.debugIdentifier, e.details.name]),
      [
        ["RESOURCE_SERVER_REMOVE", "operator", "", "req-rs-remove", "Cars"],
        ["RESOURCE_SERVER_ROTATE", "operator", "", "req-rs-rotate", "Cars"],
      ],
    );
    for (const secret of [server.clientSecret, rotated.clientSecret])
      assert.ok(!JSON.stringify(trail).includes(secret), "never a secret in the trail");
  });

  test("audit list: a TMC's trail or the platform's, exactly one of them", async () => {
    const { tmcId } = await h.operator.createTmc({ name: "Trail TMC" }, asOperator);
    await rejectsWithRpc(h.operator.listAuditEvents({}, asOperator), {
      code: Code.InvalidArgument,
      errorCode: "API_VALIDATION_FAILED",
      message: "tmcId is required (or platform, for the events of no TMC)",
      params: [{ name: "tmcId", value: "required unless platform is set" }],
    });
    await rejectsWithRpc(h.operator.listAuditEvents({ tmcId, platform: true }, asOperator), {
      code: Code.InvalidArgument,
      errorCode: "API_VALIDATION_FAILED",
      message: "Give either tmcId or platform, not both",
      params: [{ name: "platform", value: "must not be set with tmcId" }],
    });
    const platform = await h.operator.listAuditEvents({ platform: true, limit: 1000 }, asOperator);
    assert.ok(platform.events.length > 0);
    assert.ok(
      platform.events.every((e) => e.tmcId === ""),
      "only events of no TMC",
    );
    await h.operator.createApiUser({ tmcId }, asOperator);
    const tmcTrail = await h.operator.listAuditEvents({ tmcId }, asOperator);
    assert.deepEqual(
      tmcTrail.events.map((e) => [e.action, e.tmcId]),
      [["API_USER_CREATE", tmcId]],
      "a TMC's trail holds no platform event",
    );
  });
});
