// A DPoP proof names the URL the client addressed (htu, RFC 9449 4.3). Behind a reverse proxy
// that is the public URL, which the service learns from X-Forwarded-Proto and -Host only when the
// proxy is in TRUSTED_PROXIES; from anyone else those headers are ignored, so a client cannot
// make a proof for another URL pass by claiming it. Over REST, on the backend of the run.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as DPoP from "dpop";
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
  type HttpReply,
} from "../helpers/token-kit.js";

const PUBLIC_ORIGIN = "https://auth.travel.example";
const FORWARDED = { "x-forwarded-proto": "https", "x-forwarded-host": "auth.travel.example" };

/** A DPoP token request of `admin` to `baseUrl` with the proof for `htu`, after the nonce round trip. */
async function tokenRequestFor(baseUrl: string, admin: Client, htu: string, headers: Record<string, string>) {
  const keys = await DPoP.generateKeyPair("ES256");
  const send = async (nonce?: string): Promise<HttpReply> =>
    postForm(
      baseUrl,
      TOKEN_PATH,
      { grant_type: "client_credentials" },
      {
        authorization: basicAuthorization(admin.clientId, admin.clientSecret),
        dpop: await DPoP.generateProof(keys, htu, "POST", nonce),
        ...headers,
      },
    );
  const first = await send();
  const nonce = first.headers.get("dpop-nonce");
  return first.body.error === "use_dpop_nonce" && nonce ? send(nonce) : first;
}

for (const [trusted, proxies] of [
  [true, "127.0.0.1"],
  [false, ""],
] as const) {
  describe(`DPoP htu behind a proxy ${trusted ? "in" : "not in"} TRUSTED_PROXIES`, () => {
    let running: RunningService;
    let admin: Client;
    before(async () => {
      running = await startTokenService({ env: { ...ROOMY_RATE_LIMITS, TRUSTED_PROXIES: proxies } });
      admin = (await newTenant(running.baseUrl)).admin;
    });
    after(() => disposeService(running));

    test("the proof must name the forwarded public URL from a trusted proxy, the service's own address otherwise", async () => {
      const publicProof = await tokenRequestFor(running.baseUrl, admin, `${PUBLIC_ORIGIN}${TOKEN_PATH}`, FORWARDED);
      const localProof = await tokenRequestFor(running.baseUrl, admin, `${running.baseUrl}${TOKEN_PATH}`, FORWARDED);
      const [accepted, refused] = trusted ? [publicProof, localProof] : [localProof, publicProof];
      assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
      assert.equal(accepted.body.token_type, "DPoP");
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      assert.equal(refused.body.error, "invalid_dpop_proof");
    });
  });
}
