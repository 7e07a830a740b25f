import assert from "node:assert/strict";
import type { DomainError } from "../../../src/errors/domain-error.js";
import { beforeEach, describe, test } from "node:test";
import { hashClientSecret } from "../../../src/domain/shared/client-secret.js";
import { tenantScope } from "../../../src/domain/shared/tenant-scope.js";
import { getOption } from "@bufbuild/protobuf";
import { field as fieldRules } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import {
  FetchOauth2TokenRequestSchema,
  IntrospectTokenRequestSchema,
  RevokeTokenRequestSchema,
} from "../../../gen/travel/auth/v2/auth_pb.js";
import crypto from "node:crypto";
import type { ApiUser } from "../../../src/domain/api-users/model.js";
import { CLIENT_ASSERTION_TYPE } from "../../../src/domain/shared/client-assertion.js";
import { ClientRecordCache } from "../../../src/domain/shared/client-record-cache.js";
import { ClientAuthenticator } from "../../../src/domain/tokens/client-authenticator.js";
import {
  claimedClientId,
  CLIENT_CREDENTIAL_MAX_LENGTH,
  clientCredentialsOf,
  type ClientCredentials,
} from "../../../src/domain/shared/client-credentials.js";
import { rejectsWith } from "../../fakes/assert-domain-error.js";
import {
  basicHeader,
  createPgliteFixture,
  newApiUser,
  newTenant,
  postCredentials,
  type PgliteDomainFixture,
  type ProvisionedApiUser,
} from "../../fakes/domain-fixture.js";

const invalidClient = { code: "INVALID_CLIENT", message: "Client authentication failed" } as const;
const bothMethods = {
  code: "INVALID_REQUEST",
  message: "Use either HTTP Basic or client_secret in the body, not both",
} as const;
const malformedBasic = { code: "INVALID_REQUEST", message: "Malformed HTTP Basic credentials" } as const;
const noAuthentication = {
  code: "CLIENT_AUTHENTICATION_REQUIRED",
  message: "Client authentication is required (HTTP Basic, or client_id and client_secret)",
} as const;
const missing = {
  code: "INVALID_REQUEST",
  message: "Client authentication is required (client_id and client_secret)",
  params: [{ name: "client_id", value: "invalid" }],
} as const;

describe("ClientAuthenticator", () => {
  let f: PgliteDomainFixture;
  let tmcId: string;
  let orgId: string;
  let client: ProvisionedApiUser;
  beforeEach(async () => {
    f = await createPgliteFixture();
    ({ tmcId, orgId } = await newTenant(f));
    client = await newApiUser(f, tmcId);
  });

  const basic = (authorization: string, formClientId = "", formClientSecret = "") =>
    clientCredentialsOf({ formClientId, formClientSecret, authorization });
  /** Both steps, as the client-authentication pipeline runs them (with the rate limiter's reservation in between). */
  const authenticate = async (credentials: ClientCredentials) => f.clients.verify(await f.clients.lookUp(credentials));

  test("client_secret_post: the form's id and secret", async () => {
    const user = await authenticate(postCredentials(client.clientId, client.secret));
    assert.deepEqual(user, client.user);
  });

  test("client_secret_basic: form-urlencoded id and secret (RFC 6749 2.3.1), any case of the scheme", async () => {
    assert.equal((await authenticate(basic(basicHeader(client.clientId, client.secret)))).clientId, client.clientId);
    assert.equal(
      (await authenticate(basic(basicHeader(client.clientId, client.secret).replace("Basic", "bAsIc")))).clientId,
      client.clientId,
    );
    // A secret with characters that must be encoded: ':' '+' '%' ' ' '/' and non-ASCII.
    const secret = "p:a+s%s w/ördé";
    await f.repos.apiUsers.insert(f.uow.direct, tenantScope(tmcId), {
      clientId: "odd-secret-client",
      orgId: undefined,
      role: "TMC_ADMIN",
      credentialType: "CLIENT_CREDENTIALS",
      secretHash: hashClientSecret(f.keys.secretPepper, secret),
      createdBy: "operator",
    });
    assert.equal((await authenticate(basic(basicHeader("odd-secret-client", secret)))).clientId, "odd-secret-client");
    // Not encoded, the '+' would read as a space: the secret no longer matches.
    const raw = `Basic ${Buffer.from(`odd-secret-client:${secret}`).toString("base64")}`;
    await rejectsWith(authenticate(basic(raw)), malformedBasic); // "%s " is not valid percent-encoding
    const rawPlus = `Basic ${Buffer.from(`${client.clientId}:${client.secret}+`).toString("base64")}`;
    await rejectsWith(authenticate(basic(rawPlus)), invalidClient);
  });

  test("Basic together with a body secret is 400, whatever the secrets; Basic with the same body client_id is fine", async () => {
    const header = basicHeader(client.clientId, client.secret);
    await rejectsWith(authenticate(basic(header, client.clientId, client.secret)), bothMethods);
    await rejectsWith(authenticate(basic(header, "", client.secret)), bothMethods);
    await rejectsWith(authenticate(basic(header, "someone-else")), bothMethods);
    assert.equal((await authenticate(basic(header, client.clientId))).clientId, client.clientId);
  });

  test("malformed Basic credentials are 400", async () => {
    await rejectsWith(authenticate(basic(`Basic ${Buffer.from("no-colon-here").toString("base64")}`)), malformedBasic);
    await rejectsWith(
      authenticate(basic(`Basic ${Buffer.from("%E0%A4%A:secret").toString("base64")}`)),
      malformedBasic,
    );
  });

  test("Basic id and secret obey the form fields' rules: the text rule and the contract's max_len", async () => {
    for (const schema of [FetchOauth2TokenRequestSchema, IntrospectTokenRequestSchema, RevokeTokenRequestSchema]) {
      for (const [name, max] of Object.entries(CLIENT_CREDENTIAL_MAX_LENGTH)) {
        const field = schema.fields.find((f) => f.name === name)!;
        const rules = getOption(field, fieldRules);
        assert.equal(rules.type.case, "string");
        assert.equal(Number(rules.type.value.maxLen), max, `${schema.typeName}.${name}`);
      }
    }
    const raw = (id: string, secret: string) => basic(`Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`);
    await rejectsWith(authenticate(raw("a\u0000", "x")), {
      code: "API_VALIDATION_FAILED",
      message: "HTTP Basic client_id contains control characters or invalid Unicode",
      params: [{ name: "client_id", value: "invalid characters" }],
    });
    await rejectsWith(authenticate(raw(client.clientId, "%ED%A0%80")), malformedBasic); // a lone surrogate, percent-encoded
    await rejectsWith(authenticate(basic(basicHeader(client.clientId, "s".repeat(1025)))), {
      code: "API_VALIDATION_FAILED",
      message: "HTTP Basic client_secret must be at most 1024 characters",
      params: [{ name: "client_secret", value: "too long" }],
    });
    await rejectsWith(authenticate(basic(basicHeader(client.clientId, "s".repeat(1024)))), invalidClient);
  });

  test("no client authentication at all (no id, no secret, no Basic) is CLIENT_AUTHENTICATION_REQUIRED: unauthenticated (401 invalid_client)", async () => {
    const refused = await rejectsWith(authenticate(postCredentials("", "")), noAuthentication);
    assert.equal(refused.kind, "UNAUTHENTICATED");
    await rejectsWith(
      authenticate(clientCredentialsOf({ formClientId: "", formClientSecret: "", authorization: null })),
      noAuthentication,
    );
    await rejectsWith(authenticate(basic("")), noAuthentication); // an empty Authorization header
    await rejectsWith(authenticate(basic(`Bearer ${client.secret}`)), noAuthentication); // another scheme is no client authentication
    await rejectsWith(authenticate(basic(basicHeader("", ""))), noAuthentication); // Basic with an empty id and secret
  });

  test("only one of id and secret is 400 invalid_request naming client_id", async () => {
    const refused = await rejectsWith(authenticate(postCredentials(client.clientId, "")), missing);
    assert.equal(refused.kind, "INVALID_ARGUMENT");
    await rejectsWith(authenticate(postCredentials("", client.secret)), missing);
    await rejectsWith(authenticate(basic(basicHeader(client.clientId, ""))), missing);
  });

  test("an unknown client, a wrong secret, a revoked client and another client's secret get the identical INVALID_CLIENT", async () => {
    const other = await newApiUser(f, tmcId);
    const revoked = await newApiUser(f, tmcId);
    await f.admin.revoke({ clientId: client.clientId, tmcId }, revoked.clientId, "r");
    const refusals = [];
    for (const [id, secret] of [
      ["unknownclientunknownclient", client.secret],
      [client.clientId, `${client.secret}x`],
      [client.clientId, other.secret],
      [revoked.clientId, revoked.secret],
    ] as const) {
      refusals.push(await rejectsWith(authenticate(postCredentials(id, secret)), invalidClient));
      refusals.push(await rejectsWith(authenticate(basic(basicHeader(id, secret))), invalidClient));
    }
    assert.equal(new Set(refusals.map((e) => JSON.stringify([e.code, e.message, e.params, e.detail]))).size, 1);
  });

  test("a SCIM-token user is refused at the token endpoint even with its genuine secret", async () => {
    const scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
    await rejectsWith(authenticate(postCredentials(scimUser.clientId, scimUser.secret)), invalidClient);
    assert.equal(
      (await f.scim.authenticate(scimUser.scimToken!)).clientId,
      scimUser.clientId,
      "its SCIM token is its credential",
    );
  });

  test("lookUp names the client the credentials claim without verifying anything; only an active CLIENT_CREDENTIALS user is a client", async () => {
    const scimUser = await newApiUser(f, tmcId, { role: "COMPANY_ADMIN", credentialType: "SCIM_TOKEN", orgId });
    const revoked = await newApiUser(f, tmcId);
    await f.admin.revoke({ clientId: client.clientId, tmcId }, revoked.clientId, "r");
    assert.deepEqual(await f.clients.lookUp(postCredentials(client.clientId, client.secret)), {
      clientId: client.clientId,
      secret: client.secret,
      client: client.user,
    });
    assert.deepEqual(
      await f.clients.lookUp(postCredentials(client.clientId, "wrong")),
      { clientId: client.clientId, secret: "wrong", client: client.user },
      "a wrong secret still names the client: its failures are counted for it (at that address)",
    );
    assert.deepEqual(await f.clients.lookUp(basic(basicHeader(client.clientId, "p:a+s s"))), {
      clientId: client.clientId,
      secret: "p:a+s s",
      client: client.user,
    });
    // Why nobody was found travels with the attempt, for the log line only.
    for (const [id, secret, refusal] of [
      ["unknownclientunknownclient", "s", "unknown or revoked client"],
      [revoked.clientId, revoked.secret, "unknown or revoked client"],
      [scimUser.clientId, scimUser.secret, "not a client-credentials API user (SCIM token)"],
    ] as const) {
      const attempt = await f.clients.lookUp(postCredentials(id, secret));
      assert.deepEqual(
        attempt,
        { clientId: id, secret, client: undefined, refusal },
        `${id} names nobody who may use the token endpoint`,
      );
      assert.throws(
        () => f.clients.verify(attempt),
        (e: DomainError) =>
          e.code === "INVALID_CLIENT" &&
          e.message === "Client authentication failed" &&
          e.logged?.refusalReason === refusal &&
          e.logged.clientId === id,
      );
    }
    assert.throws(
      () => f.clients.verify({ clientId: client.clientId, secret: "wrong", client: client.user }),
      (e: DomainError) =>
        e.code === "INVALID_CLIENT" &&
        e.logged?.refusalReason === "wrong secret" &&
        !JSON.stringify(e.logged).includes('wrong"'),
    );
  });

  test("lookUp refuses a malformed request before it reads the database; verify never reads it", async () => {
    f.store.calls.length = 0;
    await rejectsWith(f.clients.lookUp(postCredentials("", "")), noAuthentication);
    await rejectsWith(f.clients.lookUp(postCredentials(client.clientId, "")), missing);
    await rejectsWith(f.clients.lookUp(basic(basicHeader(client.clientId, client.secret), "", "s")), bothMethods);
    await rejectsWith(f.clients.lookUp(basic(`Basic ${Buffer.from("no-colon").toString("base64")}`)), malformedBasic);
    assert.deepEqual(f.store.calls, []);
    const attempt = await f.clients.lookUp(postCredentials(client.clientId, client.secret));
    assert.deepEqual(f.store.calls, ["apiUsers.findActive"], "one read");
    assert.deepEqual(
      f.clients.verify(attempt),
      client.user,
      "synchronous: no I/O between the comparison and the answer",
    );
    assert.deepEqual(f.store.calls, ["apiUsers.findActive"]);
  });

  test("verify: an unknown client and a wrong secret get the same INVALID_CLIENT; a right secret against nobody is still refused", async () => {
    const errors = [];
    for (const attempt of [
      { clientId: "nobody", secret: client.secret, client: undefined },
      { clientId: client.clientId, secret: "wrong", client: client.user },
      { clientId: client.clientId, secret: "", client: client.user },
    ]) {
      errors.push(await rejectsWith(async () => f.clients.verify(attempt), invalidClient));
    }
    assert.equal(new Set(errors.map((e) => JSON.stringify([e.code, e.message, e.params, e.detail]))).size, 1);
    assert.deepEqual(
      f.clients.verify({ clientId: client.clientId, secret: client.secret, client: client.user }),
      client.user,
    );
  });

  test("the claimed client id (for rate limiting and the audit) is parsed with the credentials, before authentication", () => {
    const header = basicHeader("basic-id", "s");
    assert.equal(claimedClientId(postCredentials("form-id", "s")), "form-id");
    assert.equal(claimedClientId(basic(header)), "basic-id");
    assert.equal(claimedClientId(basic(header, "form-id", "s")), "form-id", "conflicting methods: the form's");
    assert.equal(claimedClientId(basic("Basic !!!")), undefined);
    assert.equal(claimedClientId(postCredentials("", "")), undefined);
  });

  test("private_key_jwt on the one-round-trip path: the held record's keys verify and its jti is spent once; a stale record's step-by-step check does not spend it again", async () => {
    const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
    const user: ApiUser = {
      ...client.user,
      publicKeys: { keys: [{ ...publicKey.export({ format: "jwk" }), kid: "k" }] },
    };
    const used = new Set<string>();
    const generations = {
      current: async (ids: readonly string[]) => new Map(ids.map((id) => [id, user.credentialGeneration])),
      believableFrom: () => 0,
    };
    const records = new ClientRecordCache<ApiUser>(generations, 10);
    await records.find(user.clientId, async () => user);
    const clients = new ClientAuthenticator({
      uow: f.uow,
      apiUsers: f.repos.apiUsers,
      pepper: f.keys.secretPepper,
      records,
      assertions: {
        replay: {
          useOnce: async (namespace, id) => !used.has(`${namespace}/${id}`) && !!used.add(`${namespace}/${id}`),
        },
        audiences: ["https://auth.test"],
        clock: () => new Date(),
      },
    });
    const now = Math.floor(Date.now() / 1000);
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const input = `${part({ alg: "EdDSA", kid: "k" })}.${part({ iss: user.clientId, sub: user.clientId, aud: "https://auth.test", jti: "j1", exp: now + 60 })}`;
    const jwt = `${input}.${crypto.sign(null, Buffer.from(input), privateKey).toString("base64url")}`;
    const presented = () =>
      clientCredentialsOf({
        formClientId: "",
        formClientSecret: "",
        authorization: null,
        clientAssertionType: CLIENT_ASSERTION_TYPE,
        clientAssertion: jwt,
      });
    const credentials = presented();
    const held = await clients.held(credentials);
    assert.equal(held?.authenticated, true);
    assert.deepEqual([...used], [`client-assertion/${user.clientId}:j1`], "spent once, by the held path");
    // The store found the held record stale: the step-by-step path of the same request passes without spending it again.
    assert.equal(clients.verify(await clients.prove(await clients.lookUp(credentials))).clientId, user.clientId);
    assert.equal(used.size, 1);
    // Another request with the same assertion (a replay) is refused on either path, its reason in the refusal.
    await rejectsWith(
      async () => clients.verify(await clients.prove(await clients.lookUp(presented()))),
      invalidClient,
    );
    const replayed = await clients.held(presented());
    assert.equal(replayed?.authenticated, false);
    assert.equal(replayed?.refusal?.code, "INVALID_CLIENT");
    assert.match(JSON.stringify(replayed?.refusal?.logged ?? {}), /assertion jti already used/);
  });
});
