import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { dropStorage, operatorCall, operatorHeaders, startService, type RunningService } from "../helpers/service.js";

/**
 * Issue 8, failure 3: the failed-authentication lockout was a lever for strangers. Eleven made-up
 * client ids from one address locked out every client at that address, correct credentials
 * included; ten wrong secrets locked a client out everywhere; concurrent guesses overshot the
 * budget (26 evaluated against 10). Failures now count per (client id, address) and, for
 * unknown ids, per address; each attempt reserves its point atomically.
 */
describe("a lockout that protects without becoming a weapon", () => {
  let running: RunningService;
  let victim: { clientId: string; clientSecret: string };
  let bystander: { clientId: string; clientSecret: string };
  before(async () => {
    running = await startService({
      env: {
        TRUSTED_PROXIES: "127.0.0.1",
        TOKEN_FAILURE_LIMIT: "10/900",
        TOKEN_RATE_LIMIT_PER_ADDRESS: "100000/60",
        TOKEN_RATE_LIMIT_PER_CLIENT: "100000/60",
      },
    });
    const seed = await operatorCall<{ tmcId: string }>(running.baseUrl, "Seed", {});
    victim = await operatorCall(running.baseUrl, "CreateApiUser", { tmcId: seed.tmcId });
    bystander = await operatorCall(running.baseUrl, "CreateApiUser", { tmcId: seed.tmcId });
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  /** A token request from `address` (through the trusted proxy's X-Forwarded-For). */
  const token = (address: string, clientId: string, clientSecret: string) =>
    fetch(`${running.baseUrl}/v2/auth/oauth2-token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
      body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret }),
    }).then((r) => r.status);

  test("made-up client ids from one address never lock out real clients at that address", async () => {
    const nat = "198.51.100.7";
    const statuses = [];
    for (let i = 0; i < 15; i++) statuses.push(await token(nat, `made-up-${i}`, "guess"));
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403));
    assert.deepEqual(statuses.slice(10), Array(5).fill(429), "the guesser is stopped");
    assert.equal(
      await token(nat, victim.clientId, victim.clientSecret),
      200,
      "a real client behind the same address is not",
    );
    assert.equal(await token(nat, bystander.clientId, bystander.clientSecret), 200);
  });

  test("wrong secrets for a client lock that client's wrong secrets out at that address only", async () => {
    const attacker = "203.0.113.9";
    for (let i = 0; i < 10; i++) assert.equal(await token(attacker, victim.clientId, `wrong-${i}`), 403);
    assert.equal(await token(attacker, victim.clientId, "wrong-again"), 429, "locked out where the guessing happens");
    assert.equal(
      await token("192.0.2.20", victim.clientId, victim.clientSecret),
      200,
      "the client elsewhere keeps getting tokens",
    );
    assert.equal(
      await token(attacker, bystander.clientId, bystander.clientSecret),
      200,
      "other clients at that address are unaffected",
    );
  });

  test("10 wrong secrets from a shared address do not refuse the right secret there, while guessing stays bounded", async () => {
    const { clientId, clientSecret } = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateApiUser",
      {
        tmcId: (await operatorCall<{ tmcId: string }>(running.baseUrl, "Seed", {})).tmcId,
      },
    );
    const nat = "198.51.100.200";
    assert.equal(
      await token(nat, clientId, clientSecret),
      200,
      "the client works from its office (and its record is now held: the one-round-trip path)",
    );
    for (let i = 0; i < 10; i++) assert.equal(await token(nat, clientId, `stranger-${i}`), 403);
    for (let round = 0; round < 3; round++) {
      assert.equal(await token(nat, clientId, clientSecret), 200, "the right secret from the shared address");
      assert.equal(await token(nat, clientId, `stranger-more-${round}`), 429, "the stranger's next guess is refused");
    }
    // Bounded: 10 failures, then at most 100 (10 × the failure limit) guesses evaluated per window for this client in all; then locked addresses are refused unevaluated.
    const statuses = [];
    for (let i = 0; i < 100; i++) statuses.push(await token(nat, clientId, `flood-${i}`));
    assert.deepEqual([...new Set(statuses)], [429]);
    assert.equal(
      await token(nat, clientId, clientSecret),
      429,
      "the locked-guess budget is spent: not evaluated any more at that address",
    );
    assert.equal(await token("192.0.2.201", clientId, clientSecret), 200, "elsewhere the client is unaffected");
  });

  test("concurrent guesses never overshoot the budget", async () => {
    const attacker = "203.0.113.50";
    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => token(attacker, bystander.clientId, `wrong-${i}`)),
    );
    assert.equal(statuses.filter((s) => s === 403).length, 10, `evaluated: ${statuses.join(",")}`);
    assert.equal(statuses.filter((s) => s === 429).length, 20);
  });

  test("successes give their point back: a client that never fails is never locked out", async () => {
    const office = "192.0.2.99";
    for (let i = 0; i < 25; i++) assert.equal(await token(office, bystander.clientId, bystander.clientSecret), 200);
  });

  test("the operator sees a lockout and lifts it at once", async () => {
    const attacker = "203.0.113.77";
    for (let i = 0; i < 10; i++) await token(attacker, victim.clientId, "wrong");
    const shown = await operatorCall<Record<string, unknown>>(running.baseUrl, "GetTokenLockout", {
      clientId: victim.clientId,
      address: attacker,
    });
    assert.equal(shown.failures, 10);
    assert.equal(shown.limit, 10);
    assert.equal(shown.lockedOut, true);
    assert.ok(Number(shown.resetSeconds) > 800 && Number(shown.resetSeconds) <= 900);
    const unknown = await operatorCall<Record<string, unknown>>(running.baseUrl, "GetTokenLockout", {
      address: "198.51.100.7",
    });
    assert.equal(unknown.lockedOut, true, "the made-up ids of the first test");
    await operatorCall(running.baseUrl, "ResetTokenLockout", { clientId: victim.clientId, address: attacker });
    assert.equal(await token(attacker, victim.clientId, victim.clientSecret), 200);
    const after = await operatorCall<Record<string, unknown>>(running.baseUrl, "GetTokenLockout", {
      clientId: victim.clientId,
      address: attacker,
    });
    // Connect's JSON leaves zero values out.
    assert.equal(after.failures ?? 0, 0);
    assert.equal(after.lockedOut ?? false, false);
  });

  test("a lockout's address must be an IP address", async () => {
    const response = await fetch(`${running.baseUrl}/travel.operator.v1.OperatorService/GetTokenLockout`, {
      method: "POST",
      headers: { ...operatorHeaders, "content-type": "application/json" },
      body: JSON.stringify({ address: "not-an-ip" }),
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as {
      details: Array<{ debug?: { errorMessages?: Array<{ errorParameters: Array<{ name: string }> }> } }>;
    };
    assert.equal(body.details[0]?.debug?.errorMessages?.[0]?.errorParameters[0]?.name, "address");
  });

  test("guesses at the operator credential are limited the same way, per address", async () => {
    const call = (address: string, token: string) =>
      fetch(`${running.baseUrl}/travel.operator.v1.OperatorService/GetTokenLockout`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "x-forwarded-for": address },
        body: JSON.stringify({ address: "192.0.2.1" }),
      }).then((r) => r.status);
    const guesser = "203.0.113.200";
    const statuses = [];
    for (let i = 0; i < 12; i++) statuses.push(await call(guesser, `guess-${i}`));
    assert.deepEqual(statuses, [...Array(10).fill(401), 429, 429]);
    // As for clients: the lockout refuses wrong credentials, not the right one.
    assert.equal(
      await call(guesser, operatorHeaders.authorization.slice("Bearer ".length)),
      200,
      "the right credential passes at that address",
    );
    assert.equal(await call(guesser, "guess-again"), 429, "wrong ones stay refused there");
    assert.equal(
      await call("192.0.2.250", operatorHeaders.authorization.slice("Bearer ".length)),
      200,
      "the operator elsewhere is not affected",
    );
  });

  test("a resource server's introspection has the same lockout: wrong secrets are stopped where they are guessed, the right secret is never refused, elsewhere nothing changes", async () => {
    const server = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateResourceServer",
      { name: "Locked-out bookings", audiences: ["https://lockout.platform.test/"] },
    );
    const introspect = (address: string, clientSecret: string) =>
      fetch(`${running.baseUrl}/v2/auth/introspect`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
        body: new URLSearchParams({ token: "any", client_id: server.clientId, client_secret: clientSecret }),
      }).then((r) => r.status);
    const attacker = "203.0.113.77";
    for (let i = 0; i < 10; i++) assert.equal(await introspect(attacker, `wrong-${i}`), 401);
    assert.equal(await introspect(attacker, "wrong-again"), 429, "locked out where the guessing happens");
    assert.equal(await introspect(attacker, server.clientSecret), 200, "the right secret still passes there");
    assert.equal(await introspect("192.0.2.77", server.clientSecret), 200, "and elsewhere");
    const madeUp = "198.51.100.77";
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++)
      statuses[i] = await fetch(`${running.baseUrl}/v2/auth/introspect`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": madeUp },
        body: new URLSearchParams({ token: "any", client_id: `rs-madeup${i}`, client_secret: "guess" }),
      }).then((r) => r.status);
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401), "made-up resource-server ids");
    assert.equal(statuses[10], 429, "stopped by the address's unknown-id budget");
    assert.equal(await introspect(madeUp, server.clientSecret), 200, "the real server at that address is not");
  });
});
