// The verifier behind a link that loses one message while staying up: a proxy between it and the
// auth service discards the HTTP/2 DATA frame that carries a token's revocation event and forwards
// everything else (heartbeats included). The verifier, with its default options, must never accept
// that token beyond its staleness bound (3 heartbeats): the next heartbeat says what the stream had
// sent, the verifier sees it missed something, refuses every token, reconnects and catches up.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { startFrameDropper, type FrameDropper } from "../../../test/helpers/h2-frame-dropper.js";
import { operatorCall, type RunningService } from "../../../test/helpers/service.js";
import {
  accessTokenOf,
  disposeService,
  ISSUER,
  newApiUser,
  newTenant,
  partsOf,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Tenant,
} from "../../../test/helpers/token-kit.js";
import { waitFor } from "../../../test/helpers/wait.js";
import { createVerifier, type Verifier } from "../src/index.js";

const AUDIENCE = "https://bookings.platform.test/api";
/** The issue's bound: 3 heartbeats of 500 ms (the verifier's default). */
const BOUND_MS = 1500;
/** How long the revoked token is presented after the revocation was acknowledged. */
const WATCH_MS = 6000;
const reasonOf = (outcome: { ok: boolean; reason?: string }) => (outcome.ok ? "ok" : outcome.reason);

describe("the verifier behind a link that drops a message while staying up", () => {
  let running: RunningService;
  let dropper: FrameDropper;
  let tenant: Tenant;
  let verifier: Verifier;

  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    dropper = await startFrameDropper(Number(new URL(running.baseUrl).port));
    tenant = await newTenant(running.baseUrl);
    const server = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateResourceServer",
      {
        name: "Bookings",
        audiences: [AUDIENCE],
      },
    );
    // Default options: the bound under test is the verifier's own.
    verifier = await createVerifier({
      authUrl: `http://127.0.0.1:${dropper.port}`,
      issuer: ISSUER,
      audience: AUDIENCE,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
    });
    await verifier.ready(10_000);
  });
  after(async () => {
    await verifier?.close();
    await dropper?.close();
    await disposeService(running);
  });

  /** Presents `token` every 5 ms for WATCH_MS after `acked`: each outcome with its time since then. */
  async function watch(token: string, acked: number): Promise<Array<{ atMs: number; reason: string }>> {
    const outcomes: Array<{ atMs: number; reason: string }> = [];
    while (performance.now() - acked < WATCH_MS) {
      const outcome = await verifier.verify(token);
      outcomes.push({ atMs: performance.now() - acked, reason: outcome.ok ? "ok" : outcome.reason });
      await sleep(5);
    }
    return outcomes;
  }

  /** Revokes `token` by RFC 7009 as its client; when the service acknowledged it (monotonic ms). */
  async function revoke(token: string, client: { clientId: string; clientSecret: string }): Promise<number> {
    const answer = await postForm(running.baseUrl, "/v2/auth/revoke", {
      token,
      client_id: client.clientId,
      client_secret: client.clientSecret,
    });
    assert.equal(answer.status, 200);
    return performance.now();
  }

  /** The checks that accepted the token beyond the bound, with a message giving the figures. */
  function beyondBound(outcomes: Array<{ atMs: number; reason: string }>): [number, string] {
    const accepts = outcomes.filter((o) => o.reason === "ok");
    const beyond = accepts.filter((o) => o.atMs > BOUND_MS).length;
    const firstRevoked = outcomes.find((o) => o.reason === "revoked")?.atMs;
    return [
      beyond,
      `${beyond} of ${outcomes.length} checks accepted the revoked token beyond ${BOUND_MS} ms (last accept ` +
        `${accepts.at(-1)?.atMs.toFixed(0)} ms, first "revoked" ${firstRevoked?.toFixed(0)} ms after the ack)`,
    ];
  }

  /** The frame dropped was one whole uncompressed gRPC message (a 5-byte prefix, then exactly its length). */
  function assertWholeMessage(payload: Buffer): void {
    assert.equal(payload[0], 0, "an uncompressed gRPC message");
    assert.equal(payload.readUInt32BE(1), payload.length - 5, "one whole message, so the framing after it holds");
  }

  test("the revocation event's frame is discarded, heartbeats pass: 0 accepts of the revoked token beyond the bound; refused as revoked once caught up", async (t) => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const token = await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE });
    assert.ok((await verifier.verify(token)).ok, "accepted before the revocation");
    const gaps = verifier.metrics().gaps;
    const lost = dropper.dropNextDataFrameContaining(Buffer.from(partsOf(token).payload.jti as string));
    const outcomes = await watch(token, await revoke(token, user));
    assertWholeMessage(await lost);
    const [beyond, figures] = beyondBound(outcomes);
    t.diagnostic(figures);
    assert.equal(beyond, 0, figures);
    assert.equal(verifier.metrics().gaps, gaps + 1, "the heartbeat after the loss revealed it");
    // Caught up: current again, and the token refused for what it is (awaited: a loaded machine may delay a heartbeat).
    await waitFor("current again", () => verifier.isCurrent());
    assert.equal(reasonOf(await verifier.verify(token)), "revoked");
  });

  test("the first of two revocations made together is lost, the second arrives (the last cursor looks right): 0 accepts of the lost one beyond the bound", async (t) => {
    const user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const [lostToken, arriving] = [
      await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE }),
      await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE }),
    ];
    for (const token of [lostToken, arriving]) assert.ok((await verifier.verify(token)).ok);
    const lost = dropper.dropNextDataFrameContaining(Buffer.from(partsOf(lostToken).payload.jti as string));
    const [acked] = await Promise.all([revoke(lostToken, user), revoke(arriving, user)]);
    const outcomes = await watch(lostToken, acked);
    assertWholeMessage(await lost);
    const [beyond, figures] = beyondBound(outcomes);
    t.diagnostic(figures);
    assert.equal(beyond, 0, figures);
    await waitFor("current again", () => verifier.isCurrent());
    assert.equal(reasonOf(await verifier.verify(lostToken)), "revoked");
    assert.equal(reasonOf(await verifier.verify(arriving)), "revoked");
  });
});
