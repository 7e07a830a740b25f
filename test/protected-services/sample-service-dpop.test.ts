// The sample protected service (examples/protected-service) with DPoP-bound tokens (RFC 9449) from
// the auth service: its REST face (the verifier's Fastify hook) and its RPC face (the verifier's
// Connect interceptor, over the Connect protocol and gRPC) accept a bound token only under the DPoP
// scheme with a proof by its key for that request, once, carrying the sample service's own nonce;
// they refuse it as Bearer. Proofs come from panva's `dpop` package, unmodified.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as DPoP from "dpop";
import { calculateJwkThumbprint, exportJWK } from "jose";
import {
  startProtectedService,
  TripsService,
  type ProtectedService,
} from "../../examples/protected-service/service.js";
import { grpcJsUnary, jsonGrpcClient, type GenericGrpcClient } from "../helpers/grpc-js.js";
import type { RunningService } from "../helpers/service.js";
import {
  disposeService,
  dpopTokenRequest,
  ISSUER,
  newTenant,
  partsOf,
  registerResourceServer,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Tenant,
} from "../helpers/token-kit.js";

const AUDIENCE = "https://trips-dpop.platform.test/api";

describe("the sample protected service with DPoP-bound tokens", () => {
  let auth: RunningService;
  let sample: ProtectedService;
  let tenant: Tenant;
  let trips: GenericGrpcClient;

  before(async () => {
    auth = await startTokenService({ env: ROOMY_RATE_LIMITS });
    const server = await registerResourceServer(auth.baseUrl, "TripsDpop", [AUDIENCE]);
    sample = await startProtectedService({
      verifierOptions: {
        authUrl: auth.baseUrl,
        issuer: ISSUER,
        audience: AUDIENCE,
        clientId: server.clientId,
        clientSecret: server.clientSecret,
      },
    });
    await sample.verifier.ready(10_000);
    trips = jsonGrpcClient(TripsService, new URL(sample.rpcUrl).host);
    tenant = await newTenant(auth.baseUrl);
  });
  after(async () => {
    trips?.close();
    await sample?.close();
    await disposeService(auth);
  });

  /** A token of the tenant's admin for the sample service's audience: DPoP-bound to `keys`, or a bearer token. */
  async function tokenFor(keys?: DPoP.KeyPair): Promise<string> {
    const fields = { grant_type: "client_credentials", resource: AUDIENCE };
    const issued = await dpopTokenRequest(auth.baseUrl, tenant.admin, fields, keys);
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    assert.equal(issued.body.token_type, keys ? "DPoP" : "Bearer");
    return issued.body.access_token as string;
  }

  /** GET /trips with `authorization` and, when given, a DPoP proof. */
  async function trip(authorization: string, proof?: string) {
    const response = await fetch(`${sample.url}/trips`, {
      headers: { authorization, ...(proof !== undefined ? { dpop: proof } : {}) },
    });
    return {
      status: response.status,
      challenge: response.headers.get("www-authenticate") ?? "",
      nonce: response.headers.get("dpop-nonce") ?? undefined,
      body: (await response.json()) as Record<string, unknown>,
    };
  }

  test("REST (Fastify hook): the sample's nonce, then a proof by the token's key is accepted once; Bearer, another key, a replay or another URL are refused", async () => {
    const keys = await DPoP.generateKeyPair("ES256");
    const token = await tokenFor(keys);
    assert.deepEqual(partsOf(token).payload.cnf, {
      jkt: await calculateJwkThumbprint(await exportJWK(keys.publicKey)),
    });
    const url = `${sample.url}/trips`;
    // The first proof carries no nonce: the sample service names its own (not the auth service's).
    const first = await trip(`DPoP ${token}`, await DPoP.generateProof(keys, url, "GET", undefined, token));
    assert.equal(first.status, 401);
    assert.match(first.challenge, /^DPoP realm="[^"]*", error="use_dpop_nonce"/);
    assert.ok(first.nonce);

    const proof = await DPoP.generateProof(keys, url, "GET", first.nonce, token);
    const accepted = await trip(`DPoP ${token}`, proof);
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    assert.deepEqual(accepted.body, { sub: tenant.admin.clientId, client_id: tenant.admin.clientId });
    assert.ok(accepted.nonce, "the next nonce is offered");

    const replayed = await trip(`DPoP ${token}`, proof);
    assert.equal(replayed.status, 401);
    assert.match(replayed.challenge, /error="invalid_dpop_proof"/);
    const asBearer = await trip(`Bearer ${token}`);
    assert.equal(asBearer.status, 401, "a bound token as a bearer token");
    assert.match(asBearer.challenge, /^Bearer realm="[^"]*", error="invalid_token"/);
    const thief = await DPoP.generateKeyPair("ES256");
    for (const [what, stolen] of [
      ["another key", await DPoP.generateProof(thief, url, "GET", first.nonce, token)],
      ["another URL", await DPoP.generateProof(keys, `${sample.url}/elsewhere`, "GET", first.nonce, token)],
      ["another method", await DPoP.generateProof(keys, url, "POST", first.nonce, token)],
      ["no ath", await DPoP.generateProof(keys, url, "GET", first.nonce)],
    ] as const) {
      const refused = await trip(`DPoP ${token}`, stolen);
      assert.equal(refused.status, 401, what);
      assert.match(refused.challenge, /^DPoP realm="[^"]*", error="invalid_dpop_proof"/, what);
    }
    // Control: an unbound token still works as a bearer token.
    assert.equal((await trip(`Bearer ${await tokenFor()}`)).status, 200);
  });

  test("RPC face (Connect interceptor): the Connect protocol and gRPC (grpc-js) with the same headers", async () => {
    const keys = await DPoP.generateKeyPair("Ed25519");
    const token = await tokenFor(keys);
    const url = `${sample.rpcUrl}/travel.examples.v1.Trips/WhoAmI`;
    const nonce = (await trip(`DPoP ${token}`, await DPoP.generateProof(keys, `${sample.url}/trips`, "GET"))).nonce;
    assert.ok(nonce, "one nonce for both faces (derived from the resource server's credentials)");

    const connect = createClient(TripsService, createConnectTransport({ baseUrl: sample.rpcUrl, httpVersion: "2" }));
    const headers = async () => ({
      authorization: `DPoP ${token}`,
      dpop: await DPoP.generateProof(keys, url, "POST", nonce, token),
    });
    const answered = await connect.whoAmI({}, { headers: await headers() });
    assert.equal(answered.clientId, tenant.admin.clientId);
    const refused = await connect.whoAmI({}, { headers: { authorization: `Bearer ${token}` } }).then(
      () => assert.fail("a bound token accepted as Bearer"),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof ConnectError && refused.code === Code.Unauthenticated, String(refused));

    const overGrpc = await grpcJsUnary(trips, "WhoAmI", {}, { metadata: await headers() });
    assert.equal(overGrpc.ok, true, overGrpc.details);
    assert.equal(overGrpc.response?.client_id, tenant.admin.clientId);
    const thief = await DPoP.generateKeyPair("ES256");
    const stolen = await grpcJsUnary(
      trips,
      "WhoAmI",
      {},
      {
        metadata: { authorization: `DPoP ${token}`, dpop: await DPoP.generateProof(thief, url, "POST", nonce, token) },
      },
    );
    assert.equal(stolen.code, grpc.status.UNAUTHENTICATED);
    assert.match(String(stolen.trailers?.get("www-authenticate")[0]), /error="invalid_dpop_proof"/);
  });
});
