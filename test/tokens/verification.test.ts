// Access-token verification on protected RPCs (spec 5.1, 5.6): GET /v2/api-users over REST and
// ApiUserService.GetApiUsers over grpc-js. Every token that is missing, malformed, tampered with,
// expired, meant for another audience, unsigned (alg none), signed by a foreign key, of the wrong
// type or issuer is 401 USER_NOT_AUTHENTICATED; a valid token without the scope or role is 403;
// a valid TMC admin token gets the exact page of its TMC's API users (200).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { generateKeyPair, SignJWT } from "jose";
import type { RunningService } from "../helpers/service.js";
import {
  accessTokenOf,
  assertApiUsersPage,
  assertError,
  assertGrpcFailure,
  b64urlJson,
  disposeService,
  genuineSigningKey,
  getWith,
  GRPC,
  grpcClients,
  newApiUser,
  newTenant,
  partsOf,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TestClock,
  type Client,
  type GrpcClients,
  type HttpReply,
  type Tenant,
} from "../helpers/token-kit.js";

const PARTNER_AUDIENCE = "https://partner.api.test/v1";
const PROTECTED = "/v2/api-users?limit=10";

const clock = new TestClock();
let running: RunningService;
let baseUrl: string;
let tenant: Tenant;
let admin: Client;
let grpcs: GrpcClients;
/** The active API users of the tenant, in creation order: what GetApiUsers must list. */
const members: string[] = [];

before(async () => {
  running = await startTokenService({
    env: { ...ROOMY_RATE_LIMITS, ALLOWED_AUDIENCES: PARTNER_AUDIENCE },
    now: clock.now,
  });
  baseUrl = running.baseUrl;
  tenant = await newTenant(baseUrl);
  admin = tenant.admin;
  members.push(admin.clientId);
  grpcs = grpcClients(baseUrl);
});

/** A COMPANY_ADMIN of the tenant; it joins the list GetApiUsers answers. */
async function newCompanyAdmin(): Promise<Client> {
  const companyAdmin = await newApiUser(baseUrl, tenant.tmcId, "COMPANY_ADMIN", tenant.orgId);
  members.push(companyAdmin.clientId);
  return companyAdmin;
}

after(async () => {
  grpcs?.close();
  await disposeService(running);
});

function assertUnauthenticated(res: HttpReply): void {
  assertError(res, 401, "USER_NOT_AUTHENTICATED");
}

/** Passed authentication and authorization: GetApiUsers answered 200 with exactly the tenant's API users. */
function assertAuthenticated(res: HttpReply): void {
  assertApiUsersPage(res, members);
}

/** Changes the character at `index` of `text` to a different base64url character. */
function flipAt(text: string, index: number): string {
  const c = text[index]!;
  return text.slice(0, index) + (c === "A" ? "B" : "A") + text.slice(index + 1);
}

/** The payload of a genuine token, for re-signing variants of it. */
async function genuinePayload(): Promise<Record<string, any>> {
  return partsOf(await accessTokenOf(baseUrl, admin)).payload;
}

describe("valid tokens", () => {
  test("a TMC admin token with every scope passes authentication", async () => {
    assertAuthenticated(await getWith(baseUrl, PROTECTED, { token: await accessTokenOf(baseUrl, admin) }));
  });

  test("a token re-signed by the service's own key with the same claims passes (control for the crafted cases)", async () => {
    const { kid, key } = await genuineSigningKey(running);
    const token = await new SignJWT(await genuinePayload())
      .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid })
      .sign(key);
    assertAuthenticated(await getWith(baseUrl, PROTECTED, { token }));
  });

  test("the bearer scheme name is case-insensitive", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    assertAuthenticated(await getWith(baseUrl, PROTECTED, { authorization: `bearer ${token}` }));
  });
});

describe("401 USER_NOT_AUTHENTICATED", () => {
  test("no Authorization header", async () => {
    assertUnauthenticated(await getWith(baseUrl, PROTECTED));
  });

  test("another scheme (Basic with the client's credentials)", async () => {
    const basic = `Basic ${Buffer.from(`${admin.clientId}:${admin.clientSecret}`).toString("base64")}`;
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { authorization: basic }));
  });

  test("malformed tokens", async () => {
    for (const token of [
      "garbage",
      "a.b.c",
      "a.b",
      "...",
      "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0",
      admin.clientSecret,
    ]) {
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { authorization: "Bearer" }));
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { authorization: "Bearer a b" }));
  });

  test("a flipped character in the payload", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    const [h, p, s] = token.split(".");
    assertUnauthenticated(
      await getWith(baseUrl, PROTECTED, { token: [h, flipAt(p!, Math.floor(p!.length / 2)), s].join(".") }),
    );
  });

  test("a flipped character in the signature", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    const [h, p, s] = token.split(".");
    assertUnauthenticated(
      await getWith(baseUrl, PROTECTED, { token: [h, p, flipAt(s!, Math.floor(s!.length / 2))].join(".") }),
    );
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token: [h, p, flipAt(s!, 0)].join(".") }));
  });

  test("a payload rewritten to a more powerful one under the original signature", async () => {
    const companyAdmin = await newCompanyAdmin();
    const token = await accessTokenOf(baseUrl, companyAdmin);
    const [h, , s] = token.split(".");
    const payload = { ...partsOf(token).payload, role: "TMC_ADMIN", scope: "api-users" };
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token: [h, b64urlJson(payload), s].join(".") }));
  });

  test("the signature removed", async () => {
    const [h, p] = (await accessTokenOf(baseUrl, admin)).split(".");
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token: `${h}.${p}.` }));
  });

  test("alg none with genuine claims", async () => {
    const { kid } = await genuineSigningKey(running);
    const payload = await genuinePayload();
    for (const alg of ["none", "None", "NONE"]) {
      const token = `${b64urlJson({ alg, typ: "at+jwt", kid })}.${b64urlJson(payload)}.`;
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
  });

  test("HS256 keyed with the public JWK (algorithm confusion)", async () => {
    const { kid } = await genuineSigningKey(running);
    const jwks = (await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as {
      keys: Array<{ kid: string; x: string }>;
    };
    const publicJwk = jwks.keys.find((k) => k.kid === kid)!;
    for (const secret of [Buffer.from(publicJwk.x, "base64url"), Buffer.from(JSON.stringify(publicJwk))]) {
      const token = await new SignJWT(await genuinePayload())
        .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid })
        .sign(new Uint8Array(secret));
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
  });

  test("signed by another EdDSA key under the service's kid, and under an unknown kid", async () => {
    const { kid } = await genuineSigningKey(running);
    const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    const payload = await genuinePayload();
    for (const header of [{ kid }, { kid: "Z68I7ssWEBkX-IrY" }, {}]) {
      const token = await new SignJWT(payload)
        .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", ...header })
        .sign(privateKey);
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
  });

  test("typ JWT (or no typ) even when signed by the service's own key", async () => {
    const { kid, key } = await genuineSigningKey(running);
    const payload = await genuinePayload();
    for (const typ of ["JWT", "jwt", "application/jwt", undefined]) {
      const token = await new SignJWT(payload)
        .setProtectedHeader({ alg: "EdDSA", kid, ...(typ ? { typ } : {}) })
        .sign(key);
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
  });

  test("another issuer, even when signed by the service's own key", async () => {
    const { kid, key } = await genuineSigningKey(running);
    const payload = { ...(await genuinePayload()), iss: "http://evil.test" };
    const token = await new SignJWT(payload).setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid }).sign(key);
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
  });

  test("required claims missing, even when signed by the service's own key", async () => {
    const { kid, key } = await genuineSigningKey(running);
    const base = await genuinePayload();
    for (const claim of ["exp", "sub", "client_id", "tmc_id", "role", "gen", "jti", "aud"]) {
      const { [claim]: _dropped, ...payload } = base;
      const token = await new SignJWT(payload).setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid }).sign(key);
      assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
    }
  });

  test("a token for an audience from ALLOWED_AUDIENCES is refused at this service", async () => {
    const token = await accessTokenOf(baseUrl, admin, { audience: PARTNER_AUDIENCE });
    assert.equal(partsOf(token).payload.aud, PARTNER_AUDIENCE);
    const res = await getWith(baseUrl, PROTECTED, { token });
    assertUnauthenticated(res);
  });

  test("an expired token: accepted just before exp, refused once the clock is past exp + 5 s", async () => {
    const token = await accessTokenOf(baseUrl, admin);
    const { iat, exp } = partsOf(token).payload;
    assert.equal(exp - iat, 3600);
    try {
      clock.advanceSeconds(3590);
      assertAuthenticated(await getWith(baseUrl, PROTECTED, { token }));
      clock.advanceSeconds(20); // 3610 s after issue: 10 s past exp
      const res = await getWith(baseUrl, PROTECTED, { token });
      assertUnauthenticated(res);
      assert.match(res.body.errorMessages[0].message, /expired/i);
      // A new token issued at the moved clock works.
      assertAuthenticated(await getWith(baseUrl, PROTECTED, { token: await accessTokenOf(baseUrl, admin) }));
    } finally {
      clock.reset();
    }
  });

  test("a token that is not valid yet (iat/nbf in the future) is refused", async () => {
    const { kid, key } = await genuineSigningKey(running);
    const now = Math.floor(Date.now() / 1000);
    const payload = { ...(await genuinePayload()), nbf: now + 600, iat: now + 600, exp: now + 4200 };
    const token = await new SignJWT(payload).setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid }).sign(key);
    assertUnauthenticated(await getWith(baseUrl, PROTECTED, { token }));
  });
});

describe("403: valid token, not allowed", () => {
  test("a TMC admin token without the api-users scope", async () => {
    const token = await accessTokenOf(baseUrl, admin, { scope: "users:read" });
    assertError(await getWith(baseUrl, PROTECTED, { token }), 403, "PERMISSION_DENIED");
  });

  test("a COMPANY_ADMIN token (role rule)", async () => {
    const companyAdmin = await newCompanyAdmin();
    const token = await accessTokenOf(baseUrl, companyAdmin);
    assertError(await getWith(baseUrl, PROTECTED, { token }), 403, "PERMISSION_DENIED");
  });
});

describe("ApiUserService.GetApiUsers over grpc-js", () => {
  test("a valid TMC admin token → OK with exactly the tenant's API users", async () => {
    const outcome = await grpcs.call("apiUser", "getApiUsers", { limit: 10 }, await accessTokenOf(baseUrl, admin));
    assert.equal(outcome.ok, true, `expected OK, got code ${outcome.code} ${JSON.stringify(outcome.errorResponse)}`);
    assert.deepEqual(outcome.response, {
      apiUsers: members.map((clientId) => ({ clientId })),
      totalCount: members.length,
    });
  });

  test("no token → UNAUTHENTICATED (16)", async () => {
    assertGrpcFailure(
      await grpcs.call("apiUser", "getApiUsers", { limit: 10 }),
      GRPC.UNAUTHENTICATED,
      "USER_NOT_AUTHENTICATED",
    );
  });

  test("a tampered token → UNAUTHENTICATED (16)", async () => {
    const [h, p, s] = (await accessTokenOf(baseUrl, admin)).split(".");
    const tampered = [h, flipAt(p!, Math.floor(p!.length / 2)), s].join(".");
    assertGrpcFailure(
      await grpcs.call("apiUser", "getApiUsers", { limit: 10 }, tampered),
      GRPC.UNAUTHENTICATED,
      "USER_NOT_AUTHENTICATED",
    );
    const badSignature = [h, p, flipAt(s!, Math.floor(s!.length / 2))].join(".");
    assertGrpcFailure(
      await grpcs.call("apiUser", "getApiUsers", { limit: 10 }, badSignature),
      GRPC.UNAUTHENTICATED,
      "USER_NOT_AUTHENTICATED",
    );
  });

  test("a token for another audience → UNAUTHENTICATED (16)", async () => {
    const token = await accessTokenOf(baseUrl, admin, { audience: PARTNER_AUDIENCE });
    assertGrpcFailure(
      await grpcs.call("apiUser", "getApiUsers", { limit: 10 }, token),
      GRPC.UNAUTHENTICATED,
      "USER_NOT_AUTHENTICATED",
    );
  });

  test("a token without the scope → PERMISSION_DENIED (7)", async () => {
    const token = await accessTokenOf(baseUrl, admin, { scope: "users:read" });
    assertGrpcFailure(
      await grpcs.call("apiUser", "getApiUsers", { limit: 10 }, token),
      GRPC.PERMISSION_DENIED,
      "PERMISSION_DENIED",
    );
  });
});
