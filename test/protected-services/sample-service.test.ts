// The sample protected service (examples/protected-service, behind the verifier
// package) against two instances of the auth service on one Postgres. Changes are made through
// instance A; the sample service follows instance B's change stream through a TCP proxy the test
// can stall, cut and point at a restarted B. Every case counts wrong accepts: a token answered 200
// after the moment it must be refused. On the embedded default one instance plays both A and B
// (its DATA_DIR belongs to one process at a time), and the restart case makes its change through
// the restarted instance before the sample service reaches it again.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { SignJWT, generateKeyPair, type JWTHeaderParameters } from "jose";
import * as grpc from "@grpc/grpc-js";
import {
  startProtectedService,
  TripsService,
  type ProtectedService,
} from "../../examples/protected-service/service.js";
import { CHANGE_STREAM_HEARTBEAT_MS } from "../../src/domain/credential-changes/credential-change-stream.js";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import { grpcJsUnary, jsonGrpcClient, type GenericGrpcClient } from "../helpers/grpc-js.js";
import { dropStorage, type RunningService } from "../helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import {
  accessTokenOf,
  genuineSigningKey,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
  type Tenant,
  registerResourceServer,
} from "../helpers/token-kit.js";

/** The sample service's audience, registered for its resource server. */
const AUDIENCE = "https://trips.platform.test/api";
/** The verifier's bound without news, short so the cut and stall cases run in seconds (the default is 5 s). */
const STALE_AFTER_MS = 1_000;

describe("the sample protected service behind the verifier, following instance B", () => {
  let storage: Storage;
  let a: RunningService;
  let b: RunningService;
  let proxy: TcpProxy;
  let sample: ProtectedService;
  let tenant: Tenant;
  /** An independent gRPC client (grpc-js) of the sample service's RPC face. */
  let trips: GenericGrpcClient;
  /** Instances to stop at the end: B may be stopped and replaced by a test. */
  const running = new Set<RunningService>();

  before(async () => {
    storage = newStorage();
    a = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
    b = isPostgres ? await startTokenService({ storage, env: ROOMY_RATE_LIMITS }) : a;
    running.add(a).add(b);
    const server = await registerResourceServer(a.baseUrl, "Trips", [AUDIENCE]);
    proxy = await startTcpProxy(Number(new URL(b.baseUrl).port));
    sample = await startProtectedService({
      verifierOptions: {
        authUrl: `http://127.0.0.1:${proxy.port}`,
        issuer: ISSUER,
        audience: AUDIENCE,
        clientId: server.clientId,
        clientSecret: server.clientSecret,
        staleAfterMs: STALE_AFTER_MS,
      },
    });
    await sample.verifier.ready(10_000);
    trips = jsonGrpcClient(TripsService, new URL(sample.rpcUrl).host);
    tenant = await newTenant(a.baseUrl);
  });
  after(async () => {
    trips?.close();
    await sample?.close();
    await proxy?.close();
    await Promise.all([...running].map((instance) => instance.stop()));
    if (storage) await dropStorage(storage);
  });

  /** The sample service's REST answer to a token: its status (200 accepted, 401 refused). */
  async function restStatus(token: string): Promise<number> {
    const response = await fetch(`${sample.url}/trips`, { headers: { authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    return response.status;
  }

  /** The sample service's gRPC answer (WhoAmI over grpc-js) to a token. */
  const rpcCall = (token: string) =>
    grpcJsUnary(trips, "WhoAmI", {}, { metadata: { authorization: `Bearer ${token}` } });

  /** A token of `client` for the sample service's audience, from instance A. */
  const tokenFor = (client: Client) => accessTokenOf(a.baseUrl, client, { resource: AUDIENCE });

  /** Rotates through A, as the TMC admin; returns the new secret. */
  async function rotate(clientId: string): Promise<string> {
    const response = await fetch(`${a.baseUrl}/v2/api-users/rotate`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${await accessTokenOf(a.baseUrl, tenant.admin)}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ clientId }),
    });
    assert.equal(response.status, 200);
    return ((await response.json()) as { clientSecret: string }).clientSecret;
  }

  /**
   * Asks the sample service about `token` again and again from now: resolves with the ms until the
   * first refusal, and fails if any answer after that first refusal is an accept (a wrong accept).
   */
  async function refusedFromNowOn(token: string, timeoutMs = 3_000, holdMs = 300): Promise<number> {
    const start = performance.now();
    let firstRefusal: number | undefined;
    while (performance.now() - start < timeoutMs) {
      const status = await restStatus(token);
      if (status === 401) firstRefusal ??= performance.now() - start;
      else {
        assert.equal(status, 200);
        assert.equal(firstRefusal, undefined, "a wrong accept: the token was accepted after it had been refused");
      }
      if (firstRefusal !== undefined && performance.now() - start - firstRefusal >= holdMs) return firstRefusal;
    }
    assert.fail(`still accepted ${timeoutMs} ms after the change`);
  }

  test("a good token is accepted; rotating its API user through A refuses it at the sample service right after the change reaches B, and never again accepts it; the new secret's token is accepted", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const old = await tokenFor(user);
    assert.equal(await restStatus(old), 200);
    const reply = await fetch(`${sample.url}/trips`, { headers: { authorization: `Bearer ${old}` } });
    assert.deepEqual(await reply.json(), { sub: partsOf(old).payload.sub, client_id: user.clientId });
    const answered = await rpcCall(old);
    assert.deepEqual(answered.response, { sub: partsOf(old).payload.sub, client_id: user.clientId });

    const secret = await rotate(user.clientId);
    const delay = await refusedFromNowOn(old);
    assert.ok(delay < 1_000, `refused ${Math.round(delay)} ms after the rotate returned`);
    assert.equal((await rpcCall(old)).code, grpc.status.UNAUTHENTICATED, "the gRPC face refuses it too");
    const metrics = sample.verifier.metrics();
    assert.ok((metrics.refusals.revoked ?? 0) >= 1, JSON.stringify(metrics));
    assert.equal(await restStatus(await tokenFor({ ...user, clientSecret: secret })), 200);
  });

  test("an RFC 7009 revocation of one token through A refuses that token; another token of the same API user is still accepted", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const [revoked, kept] = [await tokenFor(user), await tokenFor(user)];
    assert.equal(await restStatus(revoked), 200);
    const answer = await postForm(a.baseUrl, "/v2/auth/revoke", {
      token: revoked,
      client_id: user.clientId,
      client_secret: user.clientSecret,
    });
    assert.equal(answer.status, 200);
    await refusedFromNowOn(revoked);
    assert.equal(await restStatus(kept), 200);
  });

  test("forged, expired, wrong-audience and wrong-issuer tokens are refused; so is garbage", async () => {
    const user = await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const original = await tokenFor(user);
    const genuine = partsOf(original);
    const { kid, key } = await genuineSigningKey(a);
    const now = Math.floor(Date.now() / 1000);
    const header = { ...(genuine.header as JWTHeaderParameters), kid };
    const signed = (claims: Record<string, unknown>, signingKey: typeof key = key) =>
      new SignJWT({ ...genuine.payload, ...claims }).setProtectedHeader(header).sign(signingKey);
    // Control: the genuine key with the genuine claims is accepted, so the refusals below are for their one change.
    assert.equal(await restStatus(await signed({ jti: crypto.randomUUID() })), 200);
    const stranger = (await generateKeyPair("EdDSA", { crv: "Ed25519" })).privateKey;
    const cases: Record<string, string> = {
      forged: await signed({ jti: crypto.randomUUID() }, stranger),
      expired: await signed({ iat: now - 7200, exp: now - 3600 }),
      "wrong audience": await signed({ aud: ["https://other.platform.test/api"] }),
      "wrong issuer": await signed({ iss: "https://evil.example" }),
      // A genuine token's signature over claims changed after signing.
      "altered claims": (() => {
        const [header, , signature] = original.split(".");
        const payload = Buffer.from(JSON.stringify({ ...genuine.payload, sub: "someone-else" })).toString("base64url");
        return `${header}.${payload}.${signature}`;
      })(),
      garbage: "not-a-jwt",
    };
    for (const [what, token] of Object.entries(cases)) {
      assert.equal(await restStatus(token), 401, what);
      assert.equal((await rpcCall(token)).code, grpc.status.UNAUTHENTICATED, `${what}, over gRPC`);
    }
    const missing = await fetch(`${sample.url}/trips`);
    assert.equal(missing.status, 401);
  });

  test("a stalled stream: after the bound every token is refused; revocations made meanwhile are applied before anything is accepted again", async () => {
    const [stays, rotated, single] = [
      await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    const good = await tokenFor(stays);
    const rotatedOld = await tokenFor(rotated);
    const revoked = await tokenFor(single);
    for (const token of [good, rotatedOld, revoked]) assert.equal(await restStatus(token), 200);

    proxy.stall();
    try {
      const stalledAt = performance.now();
      const refusedAfter = (await refusedFromNowOn(good, STALE_AFTER_MS + 2_000, 200)) + stalledAt;
      // The bound runs from the last word heard, at most a heartbeat before the stall.
      const bound = STALE_AFTER_MS - CHANGE_STREAM_HEARTBEAT_MS - 50;
      assert.ok(refusedAfter - stalledAt >= bound, `refused ${Math.round(refusedAfter - stalledAt)} ms into the stall`);
      assert.equal(sample.verifier.isCurrent(), false);
      await rotate(rotated.clientId);
      await postForm(a.baseUrl, "/v2/auth/revoke", {
        token: revoked,
        client_id: single.clientId,
        client_secret: single.clientSecret,
      });
    } finally {
      proxy.resume();
    }
    await acceptedAgainWithout(good, [rotatedOld, revoked]);
  });

  test("the instance it follows stops: every token refused; a change made while it is away is applied when a restarted B is back, before anything is accepted", async () => {
    const [stays, rotated] = [
      await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
      await newApiUser(a.baseUrl, tenant.tmcId, "TMC_ADMIN"),
    ];
    const good = await tokenFor(stays);
    const rotatedOld = await tokenFor(rotated);
    assert.equal(await restStatus(good), 200);

    running.delete(b);
    await b.stop();
    await refusedFromNowOn(good, STALE_AFTER_MS + 3_000, 200);
    // Postgres: through A while B is down. Embedded (one instance, now stopped): through the
    // restarted instance before the sample service can reach it again.
    if (isPostgres) await rotate(rotated.clientId);
    const restarted = await startTokenService({ storage, env: ROOMY_RATE_LIMITS });
    running.add(restarted);
    if (!isPostgres) {
      a = restarted;
      await rotate(rotated.clientId);
    }
    proxy.retarget(Number(new URL(restarted.baseUrl).port));
    await acceptedAgainWithout(good, [rotatedOld], 15_000);
  });

  /**
   * After a reconnection: polls until `good` is accepted again; on every round the `refused`
   * tokens are asked first and must be refused (a wrong accept fails the test).
   */
  async function acceptedAgainWithout(good: string, refused: readonly string[], timeoutMs = 10_000): Promise<void> {
    const start = performance.now();
    for (;;) {
      for (const token of refused) assert.equal(await restStatus(token), 401, "a token revoked while disconnected");
      if ((await restStatus(good)) === 200) break;
      assert.ok(performance.now() - start < timeoutMs, "not accepted again after the stream came back");
      await new Promise((r) => setTimeout(r, 25));
    }
    for (const token of refused) assert.equal(await restStatus(token), 401, "a token revoked while disconnected");
    assert.equal(sample.verifier.isCurrent(), true);
  }
});
