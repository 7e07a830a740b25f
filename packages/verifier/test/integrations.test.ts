// The verifier in front of services: the Fastify hook, the grpc-js server interceptor and the
// Connect interceptor accept a good token and hand its claims to the handler; they refuse a
// missing, forged, revoked or stale one with 401 / UNAUTHENTICATED and an RFC 6750 challenge,
// without reaching the handler. A DPoP-bound token (RFC 9449) passes only with a proof by its key
// for the request, with the resource server's nonce, once (proofs by panva's `dpop` package).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import Fastify, { type FastifyInstance } from "fastify";
import { operatorCall, type RunningService } from "../../../test/helpers/service.js";
import { startTcpProxy, type TcpProxy } from "../../../test/helpers/tcp-proxy.js";
import {
  accessTokenOf,
  disposeService,
  ISSUER,
  newApiUser,
  newTenant,
  postForm,
  ROOMY_RATE_LIMITS,
  startTokenService,
  type Client,
} from "../../../test/helpers/token-kit.js";
import { waitFor } from "../../../test/helpers/wait.js";
import { AuthService, IntrospectTokenResponseSchema } from "../src/gen/travel/auth/v2/auth_pb.js";
import { createVerifier, grpcClaimsOf, tokenClaimsKey, type Verifier } from "../src/index.js";
import * as DPoP from "dpop";

const AUDIENCE = "https://trips.platform.test/api";
const WHO_AM_I = "/test.Trips/WhoAmI";
const PUBLIC_ORIGIN = "https://trips.platform.test";
const json = {
  serialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? {})),
  deserialize: (bytes: Buffer): unknown => (bytes.length ? JSON.parse(bytes.toString("utf8")) : {}),
};

describe("the verifier's Fastify hook, grpc-js interceptor and Connect interceptor", () => {
  let running: RunningService;
  let proxy: TcpProxy;
  let verifier: Verifier;
  let user: Client;
  let app: FastifyInstance;
  let grpcServer: grpc.Server;
  let grpcClient: grpc.Client;
  let handled = 0;
  let connectClient: ReturnType<typeof createClient<typeof AuthService>>;
  before(async () => {
    running = await startTokenService({ env: ROOMY_RATE_LIMITS });
    proxy = await startTcpProxy(Number(new URL(running.baseUrl).port));
    const tenant = await newTenant(running.baseUrl);
    user = await newApiUser(running.baseUrl, tenant.tmcId, "TMC_ADMIN");
    const server = await operatorCall<{ clientId: string; clientSecret: string }>(
      running.baseUrl,
      "CreateResourceServer",
      { name: "Trips", audiences: [AUDIENCE] },
    );
    verifier = await createVerifier({
      authUrl: `http://127.0.0.1:${proxy.port}`,
      issuer: ISSUER,
      audience: AUDIENCE,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      staleAfterMs: 1000,
      // The origin clients address the three services by: DPoP proofs name it in their htu.
      publicOrigin: PUBLIC_ORIGIN,
    });
    await verifier.ready();

    app = Fastify();
    app.addHook("onRequest", verifier.fastifyHook());
    app.get(
      "/who",
      async (request) => (handled++, { sub: request.tokenClaims?.sub, client_id: request.tokenClaims?.client_id }),
    );

    grpcServer = new grpc.Server({ interceptors: [verifier.grpcServerInterceptor()] });
    grpcServer.addService(
      {
        whoAmI: {
          path: WHO_AM_I,
          requestStream: false,
          responseStream: false,
          requestSerialize: json.serialize,
          requestDeserialize: json.deserialize,
          responseSerialize: json.serialize,
          responseDeserialize: json.deserialize,
        },
      },
      {
        whoAmI: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
          handled++;
          const claims = grpcClaimsOf(call);
          callback(null, { sub: claims?.sub, client_id: claims?.client_id });
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    grpcClient = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    // A Connect service (the AuthService shape, one method) whose handler answers with the claims it was given.
    connectClient = createClient(
      AuthService,
      createRouterTransport(
        ({ service }) =>
          service(AuthService, {
            introspectTokens: (_request, context) => {
              handled++;
              const claims = context.values.get(tokenClaimsKey);
              return {
                results: [
                  create(IntrospectTokenResponseSchema, { sub: claims?.sub ?? "", clientId: claims?.client_id ?? "" }),
                ],
              };
            },
          }),
        { router: { interceptors: [verifier.connectInterceptor()] } },
      ),
    );
  });
  after(async () => {
    grpcClient?.close();
    grpcServer?.forceShutdown();
    await app?.close();
    await verifier?.close();
    await proxy?.close();
    await disposeService(running);
  });

  const rest = (authorization?: string) =>
    app.inject({ method: "GET", url: "/who", headers: authorization ? { authorization } : {} });
  const grpcCall = (authorization?: string) =>
    new Promise<{ code: number; body?: any; challenge?: string }>((resolve) => {
      const metadata = new grpc.Metadata();
      if (authorization) metadata.set("authorization", authorization);
      grpcClient.makeUnaryRequest(WHO_AM_I, json.serialize, json.deserialize, {}, metadata, (error, body) =>
        resolve(
          error
            ? { code: error.code, challenge: error.metadata.get("www-authenticate")[0] as string | undefined }
            : { code: 0, body },
        ),
      );
    });
  const connectCall = async (authorization?: string) => {
    try {
      const answer = await connectClient.introspectTokens(
        { tokens: ["x"] },
        authorization ? { headers: { authorization } } : {},
      );
      return { code: 0, body: answer.results[0] };
    } catch (error) {
      const e = ConnectError.from(error);
      return { code: e.code as number, challenge: e.metadata.get("www-authenticate") ?? undefined };
    }
  };

  test("a good token: the handler gets its claims (REST 200, gRPC OK, Connect OK)", async () => {
    const token = await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE });
    const reply = await rest(`Bearer ${token}`);
    assert.equal(reply.statusCode, 200, reply.body);
    assert.deepEqual(reply.json(), { sub: user.clientId, client_id: user.clientId });
    const overGrpc = await grpcCall(`Bearer ${token}`);
    assert.deepEqual(overGrpc, { code: 0, body: { sub: user.clientId, client_id: user.clientId } });
    const overConnect = await connectCall(`Bearer ${token}`);
    assert.equal(overConnect.code, 0);
    assert.equal(overConnect.body?.sub, user.clientId);
    assert.equal(overConnect.body?.clientId, user.clientId);
  });

  test("no token, a forged one, a revoked one, and every token while stale: 401 / UNAUTHENTICATED with a Bearer challenge; the handler never runs", async () => {
    const token = await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE });
    const [h, p] = token.split(".");
    const forged = `${h}.${p}.${Buffer.alloc(64).toString("base64url")}`;
    const revoked = await accessTokenOf(running.baseUrl, user, { resource: AUDIENCE });
    await postForm(running.baseUrl, "/v2/auth/revoke", {
      token: revoked,
      client_id: user.clientId,
      client_secret: user.clientSecret,
    });
    await waitFor("the revocation applied", async () => {
      const outcome = await verifier.verify(revoked);
      return !outcome.ok && outcome.reason === "revoked";
    });
    const before = handled;
    const cases: Array<[string | undefined, string]> = [
      [undefined, "no token"],
      ["Basic dXNlcjpwYXNz", "not a bearer token"],
      [`Bearer ${forged}`, "forged"],
      [`Bearer ${revoked}`, "revoked"],
    ];
    for (const [authorization, what] of cases) {
      const invalid = authorization?.startsWith("Bearer ") ?? false;
      const expected = invalid
        ? /^Bearer realm="[^"]+", error="invalid_token", error_description="[^"]+"$/
        : /^Bearer realm="[^"]+"$/;
      const reply = await rest(authorization);
      assert.equal(reply.statusCode, 401, what);
      assert.match(String(reply.headers["www-authenticate"]), expected, what);
      assert.equal(reply.json().error, "invalid_token", what);
      const overGrpc = await grpcCall(authorization);
      assert.equal(overGrpc.code, grpc.status.UNAUTHENTICATED, what);
      assert.match(overGrpc.challenge ?? "", expected, what);
      const overConnect = await connectCall(authorization);
      assert.equal(overConnect.code, Code.Unauthenticated, what);
      assert.match(overConnect.challenge ?? "", expected, what);
    }
    proxy.stall();
    try {
      await waitFor("stale", async () => {
        const outcome = await verifier.verify(token);
        return !outcome.ok && outcome.reason === "stale";
      });
      assert.equal((await rest(`Bearer ${token}`)).statusCode, 401, "stale over REST");
      assert.equal((await grpcCall(`Bearer ${token}`)).code, grpc.status.UNAUTHENTICATED, "stale over gRPC");
      assert.equal((await connectCall(`Bearer ${token}`)).code, Code.Unauthenticated, "stale over Connect");
    } finally {
      proxy.resume();
    }
    assert.equal(handled, before, "no handler ran");
    await verifier.ready();
    assert.equal((await rest(`Bearer ${token}`)).statusCode, 200, "accepted again once caught up");
  });

  /** The three integrations, each called with the given headers: the status (0 = OK), the challenge and the DPoP-Nonce. */
  const calls = {
    rest: async (headers: Record<string, string>) => {
      const reply = await app.inject({ method: "GET", url: "/who", headers });
      const header = (name: string) => (reply.headers[name] as string | undefined) ?? undefined;
      return {
        code: reply.statusCode === 200 ? 0 : reply.statusCode,
        challenge: header("www-authenticate"),
        nonce: header("dpop-nonce"),
      };
    },
    grpc: (headers: Record<string, string>) =>
      new Promise<{ code: number; challenge?: string; nonce?: string }>((resolve) => {
        const metadata = new grpc.Metadata();
        for (const [name, value] of Object.entries(headers)) metadata.set(name, value);
        let nonce: string | undefined;
        const call = grpcClient.makeUnaryRequest(WHO_AM_I, json.serialize, json.deserialize, {}, metadata, (error) => {
          const trailer = (name: string) => error?.metadata.get(name)[0] as string | undefined;
          resolve({
            code: error ? error.code : 0,
            challenge: trailer("www-authenticate"),
            nonce: error ? trailer("dpop-nonce") : nonce,
          });
        });
        call.on("metadata", (m) => (nonce = m.get("dpop-nonce")[0] as string | undefined));
      }),
    connect: async (headers: Record<string, string>) => {
      try {
        const answer = await connectClient.introspectTokens({ tokens: ["x"] }, { headers });
        return { code: answer.results[0]?.sub ? 0 : -1 };
      } catch (error) {
        const e = ConnectError.from(error);
        return {
          code: e.code as number,
          challenge: e.metadata.get("www-authenticate") ?? undefined,
          nonce: e.metadata.get("dpop-nonce") ?? undefined,
        };
      }
    },
  };
  const request = {
    rest: { method: "GET", url: `${PUBLIC_ORIGIN}/who` },
    grpc: { method: "POST", url: `${PUBLIC_ORIGIN}${WHO_AM_I}` },
    connect: { method: "POST", url: `${PUBLIC_ORIGIN}/travel.auth.v2.AuthService/IntrospectTokens` },
  };

  /** A token bound to `keys`, from the service's token endpoint (its nonce first). */
  async function boundToken(keys: DPoP.KeyPair): Promise<string> {
    const tokenUrl = `${running.baseUrl}/v2/auth/oauth2-token`;
    const ask = async (proof: string) =>
      postForm(
        running.baseUrl,
        "/v2/auth/oauth2-token",
        { grant_type: "client_credentials", resource: AUDIENCE },
        {
          authorization: `Basic ${Buffer.from(`${user.clientId}:${user.clientSecret}`).toString("base64")}`,
          dpop: proof,
        },
      );
    const first = await ask(await DPoP.generateProof(keys, tokenUrl, "POST"));
    const nonce = first.headers.get("dpop-nonce") ?? undefined;
    const issued = await ask(await DPoP.generateProof(keys, tokenUrl, "POST", nonce));
    assert.equal(issued.body.token_type, "DPoP", JSON.stringify(issued.body));
    return issued.body.access_token as string;
  }

  for (const face of ["rest", "grpc", "connect"] as const) {
    test(`DPoP over ${face}: a proof by the token's key, with the nonce, once; Bearer, another key, a replay refused`, async () => {
      const keys = await DPoP.generateKeyPair("ES256");
      const token = await boundToken(keys);
      const { method, url } = request[face];
      const call = calls[face];
      const dpop = (proof: string) => ({ authorization: `DPoP ${token}`, dpop: proof });
      // The first proof has no nonce: use_dpop_nonce, and the nonce to use.
      const first = await call(dpop(await DPoP.generateProof(keys, url, method, undefined, token)));
      assert.notEqual(first.code, 0);
      assert.match(first.challenge ?? "", /^DPoP realm="[^"]+", error="use_dpop_nonce"/);
      const nonce = first.nonce;
      assert.ok(nonce, "the refusal carries DPoP-Nonce");
      const good = await DPoP.generateProof(keys, url, method, nonce, token);
      const before = handled;
      const ok = await call(dpop(good));
      assert.equal(ok.code, 0, ok.challenge);
      assert.equal(handled, before + 1);
      if (face !== "connect") assert.ok(ok.nonce, "the answer offers the next nonce");
      const replayed = await call(dpop(good));
      assert.match(replayed.challenge ?? "", /error="invalid_dpop_proof"/, "replay");
      const other = await DPoP.generateKeyPair("ES256");
      const stolen = await call(dpop(await DPoP.generateProof(other, url, method, nonce, token)));
      assert.match(stolen.challenge ?? "", /error="invalid_dpop_proof"/, "another key");
      const asBearer = await call({ authorization: `Bearer ${token}` });
      assert.match(asBearer.challenge ?? "", /error="invalid_token"/, "as Bearer");
      const wrongUrl = await call(
        dpop(await DPoP.generateProof(keys, `${PUBLIC_ORIGIN}/elsewhere`, method, nonce, token)),
      );
      assert.match(wrongUrl.challenge ?? "", /error="invalid_dpop_proof"/, "wrong htu");
      assert.equal(handled, before + 1, "no refused call reached the handler");
      assert.equal((await verifier.verify(token)).ok, false, "verify() alone refuses a bound token");
    });
  }
});
