import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as DPoP from "dpop";
import { isPostgres } from "../helpers/backend.js";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import type { RunningService } from "../helpers/service.js";
import {
  basicAuthorization,
  disposeService,
  newTenant,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  TOKEN_PATH,
  type Client,
} from "../helpers/token-kit.js";

/**
 * A DPoP proof is accepted once (RFC 9449 11.1), and a Redis emptied mid-run (FLUSHALL, on a
 * throwaway Redis on a private port) must not let a proof it had seen through again: the replay
 * cache refuses what it could have seen.
 */
describe(
  "DPoP proof replay survives a Redis flush",
  { skip: !isPostgres && "the embedded default keeps its replay cache in its database" },
  () => {
    let redis: PrivateRedis;
    let running: RunningService;
    let admin: Client;

    before(async () => {
      redis = await startPrivateRedis();
      running = await startTokenService({
        env: { ...ROOMY_RATE_LIMITS, REDIS_URL: redis.url, REDIS_RECONNECT_MAX_DELAY_MS: "100" },
      });
      admin = (await newTenant(running.baseUrl)).admin;
    });
    after(async () => {
      await disposeService(running);
      await redis?.stop();
    });

    const ask = (proof: string) =>
      postForm(
        running.baseUrl,
        TOKEN_PATH,
        { grant_type: "client_credentials" },
        { authorization: basicAuthorization(admin.clientId, admin.clientSecret), dpop: proof },
      );

    test("a proof used before the flush is refused after it", async () => {
      const keys = await DPoP.generateKeyPair("ES256");
      const url = `${running.baseUrl}${TOKEN_PATH}`;
      const nonce = (await ask(await DPoP.generateProof(keys, url, "POST"))).headers.get("dpop-nonce") ?? undefined;
      const proof = await DPoP.generateProof(keys, url, "POST", nonce);
      const first = await ask(proof);
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.token_type, "DPoP");
      await redis.command(["FLUSHALL"]);
      const replayed = await ask(proof);
      assert.equal(replayed.status, 400, JSON.stringify(replayed.body));
      assert.equal(replayed.body.error, "invalid_dpop_proof");
    });
  },
);
