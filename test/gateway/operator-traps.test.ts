// Operator traps seen from outside: a wrong method on a known REST path is 405 with
// Allow (not 404); a refused INVALID_CLIENT is logged with the client id and the check that
// failed (the wire answer stays uniform); validation refusals are logged with their
// errorParameters, never with a credential.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";

let running: RunningService;
let tmcId: string;
let orgId: string;

before(async () => {
  running = await startService({ env: { TOKEN_LOCKOUT_FAILURES: "1000" } });
  tmcId = (await operatorCall<{ tmcId: string }>(running.baseUrl, "CreateTmc", { name: "Traps TMC", maxApiUsers: 20 }))
    .tmcId;
  orgId = (await operatorCall<{ orgId: string }>(running.baseUrl, "CreateCompany", { tmcId, name: "Traps company" }))
    .orgId;
});
after(async () => {
  await running.stop();
  await dropStorage(running.storage);
});

const newClient = () =>
  operatorCall<{ clientId: string; clientSecret: string }>(running.baseUrl, "CreateApiUser", { tmcId });

function tokenRequest(fields: Record<string, string>): Promise<Response> {
  return fetch(`${running.baseUrl}/v2/auth/oauth2-token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...fields }),
  });
}

/** The request's log line (the one written when it completed), found by its x-request-id. */
function logLineOf(response: Response): Record<string, any> {
  const id = response.headers.get("x-request-id");
  assert.ok(id, "the answer has an x-request-id");
  const line = running
    .logs()
    .split("\n")
    .filter((l) => l.includes(id) && l.includes('"request completed"'))
    .map((l) => JSON.parse(l) as Record<string, any>)[0];
  assert.ok(line, `a log line for request ${id}`);
  return line;
}

describe("405 with Allow on a known path asked with the wrong method", () => {
  for (const path of ["/v2/auth/oauth2-token", "/v2/auth/introspect", "/v2/auth/revoke", "/get-auth-token"]) {
    for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
      test(`${method} ${path} → 405, Allow: POST, ErrorResponse in the OAuth dialect`, async () => {
        // A body the route would refuse (text/plain): the method is judged first.
        const response = await fetch(`${running.baseUrl}${path}`, {
          method,
          ...(method === "GET" ? {} : { headers: { "content-type": "text/plain" }, body: "x" }),
        });
        assert.equal(response.status, 405);
        assert.equal(response.headers.get("allow"), "POST");
        const body = (await response.json()) as Record<string, any>;
        assert.equal(body.debugIdentifier, response.headers.get("x-request-id"));
        assert.deepEqual(body.errorMessages[0], {
          errorCode: "METHOD_NOT_ALLOWED",
          message: `${method} is not allowed on ${path}; it takes POST`,
          errorParameters: [{ name: "allow", value: "POST" }],
        });
        assert.equal(body.error, "invalid_request");
      });
    }
  }

  test("HEAD on the token endpoint → 405 with Allow and no body", async () => {
    const response = await fetch(`${running.baseUrl}/v2/auth/oauth2-token`, { method: "HEAD" });
    assert.equal(response.status, 405);
    assert.equal(response.headers.get("allow"), "POST");
  });

  test("a SCIM path answers in the SCIM dialect; an unknown path is still 404", async () => {
    const scim = await fetch(`${running.baseUrl}/v2/scim/v2/Users`, { method: "DELETE" });
    assert.equal(scim.status, 405);
    assert.equal(scim.headers.get("allow"), "GET, HEAD, POST");
    const body = (await scim.json()) as Record<string, any>;
    assert.equal(body.status, "405");
    assert.deepEqual(body.schemas, ["urn:ietf:params:scim:api:messages:2.0:Error"]);
    assert.equal((await fetch(`${running.baseUrl}/v2/auth/nothing`)).status, 404);
  });
});

describe("INVALID_CLIENT: one answer on the wire, the client and the failed check in the log", () => {
  test("unknown client, wrong secret (both paths), revoked client, SCIM-token user", async () => {
    const known = await newClient();
    const revoked = await newClient();
    await operatorCall(running.baseUrl, "RevokeApiUser", { tmcId, clientId: revoked.clientId });
    const scim = await operatorCall<{ clientId: string; scimToken: string }>(running.baseUrl, "CreateApiUser", {
      tmcId,
      orgId,
      role: "COMPANY_ADMIN",
      credentialType: "SCIM_TOKEN",
    });
    const wrongSecret = "wrong-secret-value-never-logged";

    const cases: Array<{ fields: Record<string, string>; clientId: string; reason: string }> = [
      {
        fields: { client_id: "no-such-client", client_secret: wrongSecret },
        clientId: "no-such-client",
        reason: "unknown or revoked client",
      },
      // Step by step: this instance holds no record of the client yet.
      {
        fields: { client_id: known.clientId, client_secret: wrongSecret },
        clientId: known.clientId,
        reason: "wrong secret",
      },
      {
        fields: { client_id: revoked.clientId, client_secret: revoked.clientSecret },
        clientId: revoked.clientId,
        reason: "unknown or revoked client",
      },
      {
        fields: { client_id: scim.clientId, client_secret: scim.scimToken },
        clientId: scim.clientId,
        reason: "not a client-credentials API user (SCIM token)",
      },
    ];
    assert.equal((await tokenRequest({ client_id: known.clientId, client_secret: known.clientSecret })).status, 200);
    // The record is now held: a wrong secret is refused on the one-round-trip path.
    cases.push({
      fields: { client_id: known.clientId, client_secret: wrongSecret },
      clientId: known.clientId,
      reason: "wrong secret",
    });

    const bodies = new Set<string>();
    for (const { fields, clientId, reason } of cases) {
      const response = await tokenRequest(fields);
      assert.equal(response.status, 403, reason);
      const { debugIdentifier: _, ...body } = (await response.json()) as Record<string, unknown>;
      bodies.add(JSON.stringify(body));
      const line = logLineOf(response);
      assert.equal(line.errorCode, "INVALID_CLIENT");
      assert.equal(line.clientId, clientId, reason);
      assert.equal(line.refusalReason, reason);
    }
    assert.equal(bodies.size, 1, `one wire answer for every cause: ${[...bodies].join(" | ")}`);
    const logs = running.logs();
    for (const secret of [wrongSecret, known.clientSecret, revoked.clientSecret, scim.scimToken]) {
      assert.equal(logs.includes(secret), false, `the log holds a secret (${secret.slice(0, 6)}…)`);
    }
  });
});

describe("validation refusals are logged with their errorParameters", () => {
  test("a REST body refused by the contract's rules names its fields in the log line", async () => {
    const { access_token: token } = (await (
      await tokenRequest(await newClient().then((c) => ({ client_id: c.clientId, client_secret: c.clientSecret })))
    ).json()) as {
      access_token: string;
    };
    const response = await fetch(`${running.baseUrl}/v2/api-users`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ tmcId: "not-a-uuid" }),
    });
    assert.equal(response.status, 400);
    const answer = (await response.json()) as Record<string, any>;
    const line = logLineOf(response);
    assert.equal(line.errorCode, "API_VALIDATION_FAILED");
    assert.deepEqual(line.errorParameters, answer.errorMessages[0].errorParameters);
    assert.equal(line.errorParameters[0].name, "tmcId");
  });

  test("a parameter naming a credential is logged with its value redacted, and the credential never", async () => {
    const marker = "S3CRET-MARKER-";
    const response = await tokenRequest({ client_id: "someone", client_secret: marker + "x".repeat(1100) });
    assert.equal(response.status, 400);
    const answer = (await response.json()) as Record<string, any>;
    assert.deepEqual(
      answer.errorMessages[0].errorParameters.map((p: { name: string }) => p.name),
      ["client_secret"],
    );
    const line = logLineOf(response);
    assert.deepEqual(line.errorParameters, [{ name: "client_secret", value: "[redacted]" }]);
    assert.equal(running.logs().includes(marker), false);
  });
});
