import assert from "node:assert/strict";
import crypto from "node:crypto";
import { before, describe, test } from "node:test";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { exportJWK, generateKeyPair } from "jose";
import { ApiUserCredentialType, ApiUserRole } from "../../../gen/travel/apiuser/v2/api_user_pb.js";
import {
  accessToken,
  asOperator,
  asRequest,
  bearer,
  provisionTmc,
  rejectsWithRpc,
  startRpc,
  type RpcHarness,
} from "./harness.js";

/** A fresh P-256 public key as a JWK. */
async function ecPublicJwk() {
  return exportJWK((await generateKeyPair("ES256", { extractable: true })).publicKey);
}

const invalid = (params: Array<{ name: string; value: string }>) =>
  ({
    code: Code.InvalidArgument,
    errorCode: "API_VALIDATION_FAILED",
    message: "The request is invalid",
    params,
  }) as const;

describe("OperatorService: TMCs, API users, trusted issuers and the audit trail", () => {
  let h: RpcHarness;
  before(async () => {
    h = await startRpc();
  });

  test("list and get TMCs: the limit and the active API-user count; paging by limit and offset", async () => {
    const a = await provisionTmc(h, 4);
    const { tmcId: b } = await h.operator.createTmc({ name: "Zeta Travel", maxApiUsers: 2 }, asOperator);
    const got = await h.operator.getTmc({ tmcId: a.tmcId }, asOperator);
    assert.deepEqual(
      [got.tmc?.tmcId, got.tmc?.name, got.tmc?.maxApiUsers, got.tmc?.activeApiUsers],
      [a.tmcId, "Globetrotter TMC", 4, 1],
    );

    const all = await h.operator.listTmcs({}, asOperator);
    assert.equal(all.totalCount, all.tmcs.length);
    const names = all.tmcs.map((t) => t.name);
    assert.deepEqual(names, [...names].sort(), "by name");
    assert.deepEqual(
      all.tmcs.filter((t) => t.tmcId === b).map((t) => [t.name, t.maxApiUsers, t.activeApiUsers]),
      [["Zeta Travel", 2, 0]],
    );
    const second = await h.operator.listTmcs({ limit: 1, offset: 1 }, asOperator);
    assert.deepEqual(
      second.tmcs.map((t) => t.tmcId),
      [all.tmcs[1]!.tmcId],
    );
    assert.equal(second.totalCount, all.totalCount);

    const unknown = crypto.randomUUID();
    await rejectsWithRpc(h.operator.getTmc({ tmcId: unknown }, asOperator), {
      code: Code.NotFound,
      errorCode: "NOT_FOUND",
      message: "TMC not found",
      params: [{ name: "tmcId", value: unknown }],
    });
    await rejectsWithRpc(
      h.operator.getTmc({ tmcId: "nope" }, asOperator),
      invalid([{ name: "tmcId", value: "must be a valid UUID" }]),
    );
    await rejectsWithRpc(
      h.operator.listTmcs({ limit: 0, offset: -1 }, asOperator),
      invalid([
        { name: "limit", value: "must be greater than or equal to 1 and less than or equal to 1000" },
        { name: "offset", value: "must be greater than or equal to 0" },
      ]),
    );
  });

  test("list API users: role, credential type, creation and the last token issued (from the audit trail); paging", async () => {
    const tenant = await provisionTmc(h, 5);
    const scim = await h.operator.createApiUser(
      {
        tmcId: tenant.tmcId,
        orgId: tenant.orgId,
        role: ApiUserRole.COMPANY_ADMIN,
        credentialType: ApiUserCredentialType.SCIM_TOKEN,
      },
      asOperator,
    );
    await accessToken(h, tenant.clientId, tenant.clientSecret);
    h.clock.advanceSeconds(1);
    await accessToken(h, tenant.clientId, tenant.clientSecret);
    await h.domain.auditLog.flush();

    const listed = await h.operator.listApiUsers({ tmcId: tenant.tmcId }, asOperator);
    assert.equal(listed.totalCount, 2);
    assert.deepEqual(
      listed.apiUsers.map((u) => [u.clientId, u.role, u.credentialType, u.orgId, u.createdBy]),
      [
        [tenant.clientId, ApiUserRole.TMC_ADMIN, ApiUserCredentialType.CLIENT_CREDENTIALS, "", "operator"],
        [scim.clientId, ApiUserRole.COMPANY_ADMIN, ApiUserCredentialType.SCIM_TOKEN, tenant.orgId, "operator"],
      ],
    );
    const [admin, scimUser] = listed.apiUsers;
    assert.ok(!Number.isNaN(Date.parse(admin!.createdAt)));
    const issued = await h.operator.listAuditEvents({ tmcId: tenant.tmcId, actions: ["TOKEN_ISSUED"] }, asOperator);
    assert.equal(issued.events.length, 2);
    assert.equal(admin!.lastTokenIssuedAt, issued.events[0]!.occurredAt, "the newest TOKEN_ISSUED");
    assert.equal(scimUser!.lastTokenIssuedAt, "", "never got a token");

    const page = await h.operator.listApiUsers({ tmcId: tenant.tmcId, limit: 1, offset: 1 }, asOperator);
    assert.deepEqual([page.apiUsers.map((u) => u.clientId), page.totalCount], [[scim.clientId], 2]);
    const unknown = crypto.randomUUID();
    await rejectsWithRpc(h.operator.listApiUsers({ tmcId: unknown }, asOperator), {
      code: Code.NotFound,
      errorCode: "NOT_FOUND",
      message: "TMC not found",
      params: [{ name: "tmcId", value: unknown }],
    });
    await rejectsWithRpc(
      h.operator.listApiUsers({ tmcId: tenant.tmcId, limit: 1001 }, asOperator),
      invalid([{ name: "limit", value: "must be greater than or equal to 1 and less than or equal to 1000" }]),
    );
  });

  test("revoke as operator: the tokens die at once; audited with the operator as actor; a second revoke is NOT_FOUND", async () => {
    const tenant = await provisionTmc(h, 5);
    const token = await accessToken(h, tenant.clientId, tenant.clientSecret);
    await h.apiUsers.getApiUsers({}, bearer(token));

    const revoked = await asRequest("req-op-revoke", "10.9.0.1", () =>
      h.operator.revokeApiUser({ tmcId: tenant.tmcId, clientId: tenant.clientId }, asOperator),
    );
    assert.deepEqual([revoked.tmcId, revoked.clientId], [tenant.tmcId, tenant.clientId]);
    await rejectsWithRpc(h.apiUsers.getApiUsers({}, bearer(token)), {
      code: Code.Unauthenticated,
      errorCode: "USER_NOT_AUTHENTICATED",
      message: "The access token has been revoked",
    });
    assert.equal((await h.operator.getTmc({ tmcId: tenant.tmcId }, asOperator)).tmc?.activeApiUsers, 0);

    const trail = await h.operator.listAuditEvents({ tmcId: tenant.tmcId, actions: ["API_USER_REVOKE"] }, asOperator);
    assert.deepEqual(
      trail.events.map((e) => [e.action, e.outcome, e.actor, e.targetClientId, e.debugIdentifier]),
      [["API_USER_REVOKE", "SUCCESS", "operator", tenant.clientId, "req-op-revoke"]],
    );
    await rejectsWithRpc(h.operator.revokeApiUser({ tmcId: tenant.tmcId, clientId: tenant.clientId }, asOperator), {
      code: Code.NotFound,
      errorCode: "NOT_FOUND",
      message: "API user not found",
      params: [{ name: "clientId", value: tenant.clientId }],
    });
    // Another TMC's API user is not found through this TMC.
    const other = await provisionTmc(h, 5);
    await rejectsWithRpc(h.operator.revokeApiUser({ tmcId: tenant.tmcId, clientId: other.clientId }, asOperator), {
      code: Code.NotFound,
      errorCode: "NOT_FOUND",
      message: "API user not found",
      params: [{ name: "clientId", value: other.clientId }],
    });
    await rejectsWithRpc(
      h.operator.revokeApiUser({ tmcId: "x", clientId: "" }, asOperator),
      invalid([
        { name: "tmcId", value: "must be a valid UUID" },
        { name: "clientId", value: "must be at least 1 characters" },
      ]),
    );
  });

  test("trusted issuers: list by issuer, remove (audited), NOT_FOUND for one the TMC does not trust", async () => {
    const tenant = await provisionTmc(h, 5);
    const other = await provisionTmc(h, 5);
    await h.operator.addTrustedIssuer(
      {
        tmcId: tenant.tmcId,
        issuer: "https://b.idp.example",
        jwksUri: "https://b.idp.example/jwks",
        audience: "aud-b",
      },
      asOperator,
    );
    await h.operator.addTrustedIssuer(
      {
        tmcId: tenant.tmcId,
        issuer: "https://a.idp.example",
        jwks: JSON.stringify({ keys: [{ ...(await ecPublicJwk()), kid: "a-1" }] }),
        audience: "aud-a",
      },
      asOperator,
    );
    await h.operator.addTrustedIssuer(
      {
        tmcId: other.tmcId,
        issuer: "https://other.idp.example",
        jwksUri: "https://other.idp.example/jwks",
        audience: "x",
      },
      asOperator,
    );

    const listed = await h.operator.listTrustedIssuers({ tmcId: tenant.tmcId }, asOperator);
    assert.deepEqual(
      listed.issuers.map((i) => [i.issuer, i.jwksUri, i.inlineJwks, i.audience]),
      [
        ["https://a.idp.example", "", true, "aud-a"],
        ["https://b.idp.example", "https://b.idp.example/jwks", false, "aud-b"],
      ],
    );
    await asRequest("req-issuer-remove", "10.9.0.2", () =>
      h.operator.removeTrustedIssuer({ tmcId: tenant.tmcId, issuer: "https://b.idp.example" }, asOperator),
    );
    assert.deepEqual(
      (await h.operator.listTrustedIssuers({ tmcId: tenant.tmcId }, asOperator)).issuers.map((i) => i.issuer),
      ["https://a.idp.example"],
    );
    const trail = await h.operator.listAuditEvents(
      { tmcId: tenant.tmcId, actions: ["TRUSTED_ISSUER_REMOVE"] },
      asOperator,
    );
    assert.deepEqual(
      trail.events.map((e) => [e.actor, e.debugIdentifier, e.details.issuer]),
      [["operator", "req-issuer-remove", "https://b.idp.example"]],
    );

    // Another TMC's issuer cannot be removed through this one.
    await rejectsWithRpc(
      h.operator.removeTrustedIssuer({ tmcId: tenant.tmcId, issuer: "https://other.idp.example" }, asOperator),
      {
        code: Code.NotFound,
        errorCode: "NOT_FOUND",
        message: "Trusted issuer not found",
        params: [
          { name: "tmcId", value: tenant.tmcId },
          { name: "issuer", value: "https://other.idp.example" },
        ],
      },
    );
    assert.equal((await h.operator.listTrustedIssuers({ tmcId: other.tmcId }, asOperator)).issuers.length, 1);
    await rejectsWithRpc(
      h.operator.removeTrustedIssuer({ tmcId: tenant.tmcId, issuer: "" }, asOperator),
      invalid([{ name: "issuer", value: "must be at least 1 characters" }]),
    );
  });

  test("an inline jwks is held to the rule of a fetched one: a private or symmetric key is refused and nothing is stored", async () => {
    const tenant = await provisionTmc(h, 5);
    const { privateKey } = await generateKeyPair("ES256", { extractable: true });
    const add = (jwks: string) =>
      h.operator.addTrustedIssuer(
        { tmcId: tenant.tmcId, issuer: "https://inline.idp.example", jwks, audience: "aud" },
        asOperator,
      );
    const refused = (message: string, value = "invalid") =>
      ({ ...invalid([{ name: "jwks", value }]), message }) as const;
    // An IdP's private key pasted by mistake, or a shared secret: never stored, not even in part.
    await rejectsWithRpc(
      add(JSON.stringify({ keys: [{ ...(await exportJWK(privateKey)), kid: "leaked" }] })),
      refused("jwks.keys[0] must be a public key (no private members)"),
    );
    await rejectsWithRpc(
      add(JSON.stringify({ keys: [{ kty: "oct", kid: "hmac", k: "c2VjcmV0" }] })),
      refused("jwks.keys[0] must be a public key (no private members)"),
    );
    // Keys no subject token could be verified with: none named by a kid, or none of RS256/ES256.
    await rejectsWithRpc(
      add(JSON.stringify({ keys: [await ecPublicJwk()] })),
      refused("jwks has no key usable for RS256 or ES256 signatures with a kid"),
    );
    await rejectsWithRpc(
      add(
        JSON.stringify({
          keys: [{ kty: "OKP", crv: "Ed25519", kid: "ed", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }],
        }),
      ),
      refused("jwks has no key usable for RS256 or ES256 signatures with a kid"),
    );
    await rejectsWithRpc(add('{"keys":[]}'), refused("jwks must be a JWK Set with 1 to 100 keys"));
    await rejectsWithRpc(add("{not json"), refused("jwks must be a JSON document", "not JSON"));
    assert.deepEqual((await h.operator.listTrustedIssuers({ tmcId: tenant.tmcId }, asOperator)).issuers, []);

    // A set as IdPs publish it (a signing key beside an encryption key) is accepted.
    const signing = { ...(await ecPublicJwk()), kid: "sig-1", use: "sig" };
    const encryption = { ...(await ecPublicJwk()), kid: "enc-1", use: "enc" };
    await add(JSON.stringify({ keys: [encryption, signing] }));
    assert.deepEqual(
      (await h.operator.listTrustedIssuers({ tmcId: tenant.tmcId }, asOperator)).issuers.map((i) => i.inlineJwks),
      [true],
    );
  });

  test("audit list: filters by action, client id and time range; pages by next_page_token", async () => {
    const tenant = await provisionTmc(h, 5);
    const created: string[] = [];
    for (let i = 0; i < 3; i++) {
      h.clock.advanceSeconds(60);
      created.push((await h.operator.createApiUser({ tmcId: tenant.tmcId }, asOperator)).clientId);
    }
    const all = await h.operator.listAuditEvents({ tmcId: tenant.tmcId, actions: ["API_USER_CREATE"] }, asOperator);
    assert.deepEqual(
      all.events.map((e) => e.targetClientId),
      [...created].reverse().concat(tenant.clientId),
      "newest first",
    );
    assert.equal(all.nextPageToken, "", "one page holds them all");

    const first = await h.operator.listAuditEvents(
      { tmcId: tenant.tmcId, actions: ["API_USER_CREATE"], limit: 2 },
      asOperator,
    );
    assert.deepEqual(
      first.events.map((e) => e.targetClientId),
      [created[2], created[1]],
    );
    assert.notEqual(first.nextPageToken, "");
    const rest = await h.operator.listAuditEvents(
      { tmcId: tenant.tmcId, actions: ["API_USER_CREATE"], limit: 2, pageToken: first.nextPageToken },
      asOperator,
    );
    assert.deepEqual(
      rest.events.map((e) => e.targetClientId),
      [created[0], tenant.clientId],
    );

    const ofOne = await h.operator.listAuditEvents({ tmcId: tenant.tmcId, clientId: created[1]! }, asOperator);
    assert.deepEqual(
      ofOne.events.map((e) => [e.action, e.targetClientId]),
      [["API_USER_CREATE", created[1]]],
    );

    const times = all.events.map((e) => new Date(e.occurredAt));
    const window = await h.operator.listAuditEvents(
      {
        tmcId: tenant.tmcId,
        actions: ["API_USER_CREATE"],
        since: timestampFromDate(times[2]!),
        until: timestampFromDate(times[0]!),
      },
      asOperator,
    );
    assert.deepEqual(
      window.events.map((e) => e.targetClientId),
      [created[1], created[0]],
      "since is inclusive, until exclusive",
    );

    await rejectsWithRpc(
      h.operator.listAuditEvents({ tmcId: tenant.tmcId, pageToken: "abc", actions: [""] }, asOperator),
      invalid([
        { name: "actions[0]", value: "must be at least 1 characters" },
        { name: "pageToken", value: "does not match regex pattern `^([1-9][0-9]{0,17})?$`" },
      ]),
    );
  });
  test("import air credits: typed rows; every bad row named by index and field, enum names checked against the v3 enums", async () => {
    const { orgId } = await provisionTmc(h);
    const row = (ticketNumber: string) => ({
      ticketNumber,
      airlineCode: "AA",
      totalFare: { amount: 412.3, currencyCode: "USD" },
      issueDate: { iso8601: "2026-01-31" },
      expiryDate: { iso8601: "2027-01-31" },
    });
    const first = await h.operator.importAirCredits(
      { companyId: orgId, credits: [row("0017770000001"), { ...row("0017770000002"), status: "USED" }] },
      asOperator,
    );
    assert.deepEqual([first.companyId, first.created, first.updated], [orgId, 2, 0]);
    const again = await h.operator.importAirCredits({ companyId: orgId, credits: [row("0017770000001")] }, asOperator);
    assert.deepEqual([again.created, again.updated], [0, 1]);
    await rejectsWithRpc(
      h.operator.importAirCredits(
        {
          companyId: orgId,
          credits: [
            row("0017770000003"),
            { ...row("0017770000004"), status: "LOST" },
            { ...row("0017770000005"), creditUsageType: "CREDIT_USAGE_TYPE_UNKNOWN", ticketNumber: "" },
          ],
        },
        asOperator,
      ),
      {
        code: Code.InvalidArgument,
        errorCode: "API_VALIDATION_FAILED",
        message: "2 of 3 credits are invalid; nothing was imported",
        params: [
          { name: "credits[1].status", value: "must be one of STATUS_UNKNOWN, OPEN, USED, RESERVED" },
          { name: "credits[2].ticketNumber", value: "is required" },
          { name: "credits[2].creditUsageType", value: "must be one of COMPANY, PERSONAL" },
        ],
      },
    );
  });
});
