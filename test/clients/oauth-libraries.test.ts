// The service driven by third-party OAuth and gRPC clients, unmodified, as their users
// run them: authlib (Debian's python3-authlib) validating both discovery documents, openid-client
// and oauth4webapi discovering the server through http://127.0.0.1:PORT with the default issuer,
// simple-oauth2 fetching and revoking a token, and grpc-js reading an error's details.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as oauth from "oauth4webapi";
import * as client from "openid-client";
import simpleOauth2 from "simple-oauth2";
import type { RunningService } from "../helpers/service.js";
import {
  disposeService,
  grpcClients,
  newTenant,
  startServiceAtOwnAddress,
  TOKEN_PATH,
  type Client,
} from "../helpers/token-kit.js";

const REVOKE_PATH = "/v2/auth/revoke";
const DISCOVERY_PATHS = ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"];

let running: RunningService;
let baseUrl: string;
let admin: Client;

before(async () => {
  // TOKEN_ISSUER unset (the test default names a fixed issuer): the default must be this address.
  running = await startServiceAtOwnAddress();
  baseUrl = running.baseUrl;
  admin = (await newTenant(baseUrl)).admin;
});
after(() => disposeService(running));

/** authlib's validate() of `validator` over `document`: its exit status and output. */
function authlibValidate(validator: "rfc8414" | "oidc", document: string) {
  const imports = {
    rfc8414: "from authlib.oauth2.rfc8414 import AuthorizationServerMetadata as Metadata",
    oidc: "from authlib.oidc.discovery import OpenIDProviderMetadata as Metadata",
  };
  // authlib accepts http only for localhost unless AUTHLIB_INSECURE_TRANSPORT is set (its
  // documented switch for development); the address here is http://127.0.0.1.
  const script = [
    "import json, sys",
    imports[validator],
    "metadata = Metadata(json.load(sys.stdin))",
    "metadata.validate()",
    "print('valid', metadata['issuer'])",
  ].join("\n");
  return spawnSync("/usr/bin/python3", ["-c", script], {
    input: document,
    encoding: "utf8",
    env: { ...process.env, AUTHLIB_INSECURE_TRANSPORT: "1" },
    timeout: 30_000,
  });
}

describe("authlib (python3-authlib)", () => {
  for (const path of DISCOVERY_PATHS) {
    test(`AuthorizationServerMetadata(...).validate() accepts ${path}`, async () => {
      const result = authlibValidate("rfc8414", await (await fetch(`${baseUrl}${path}`)).text());
      assert.equal(result.status, 0, `authlib refused the document: ${result.stderr}`);
      assert.equal(result.stdout.trim(), `valid ${baseUrl}`);
    });
  }

  test("OpenIDProviderMetadata(...).validate() accepts /.well-known/openid-configuration (and would refuse the RFC 8414 document there)", async () => {
    const openId = authlibValidate("oidc", await (await fetch(`${baseUrl}/.well-known/openid-configuration`)).text());
    assert.equal(openId.status, 0, `authlib refused the document: ${openId.stderr}`);
    assert.equal(openId.stdout.trim(), `valid ${baseUrl}`);
    const plain = authlibValidate(
      "oidc",
      await (await fetch(`${baseUrl}/.well-known/oauth-authorization-server`)).text(),
    );
    assert.match(plain.stderr, /id_token_signing_alg_values_supported/);
  });
});

describe("discovery through http://127.0.0.1:PORT with the default issuer", () => {
  test("openid-client: default discovery, client credentials (Basic), revocation", async () => {
    const config = await client.discovery(
      new URL(baseUrl),
      admin.clientId,
      undefined,
      client.ClientSecretBasic(admin.clientSecret),
      {
        execute: [client.allowInsecureRequests],
      },
    );
    assert.equal(config.serverMetadata().issuer, baseUrl);
    const tokens = await client.clientCredentialsGrant(config, { scope: "users:read" });
    assert.equal(tokens.scope, "users:read");
    await client.tokenRevocation(config, tokens.access_token);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
  });

  test("oauth4webapi: RFC 8414 discovery (issuer checked), client credentials (post), revocation", async () => {
    const issuer = new URL(baseUrl);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", [oauth.allowInsecureRequests]: true }),
    );
    const who: oauth.Client = { client_id: admin.clientId };
    const auth = oauth.ClientSecretPost(admin.clientSecret);
    const options = { [oauth.allowInsecureRequests]: true };
    const tokens = await oauth.processClientCredentialsResponse(
      as,
      who,
      await oauth.clientCredentialsGrantRequest(as, who, auth, { scope: "users:read" }, options),
    );
    assert.equal(tokens.token_type, "bearer");
    assert.equal(
      await oauth.processRevocationResponse(await oauth.revocationRequest(as, who, auth, tokens.access_token, options)),
      undefined,
    );
  });
});

describe("simple-oauth2", () => {
  for (const authorizationMethod of ["header", "body"] as const) {
    test(`ClientCredentials getToken and revoke (client authentication in the ${authorizationMethod})`, async () => {
      const cc = new simpleOauth2.ClientCredentials({
        client: { id: admin.clientId, secret: admin.clientSecret },
        auth: { tokenHost: baseUrl, tokenPath: TOKEN_PATH, revokePath: REVOKE_PATH },
        options: { authorizationMethod },
      });
      const token = await cc.getToken({ scope: "users:read" });
      const accessToken = token.token.access_token as string;
      const before = await fetch(`${baseUrl}/v2/users/00000000-0000-4000-8000-000000000000`, {
        headers: { authorization: `Bearer ${accessToken}` },
      });
      assert.notEqual(before.status, 401, "the token works before revocation");
      // RFC 7009's 200 must carry a JSON content type: simple-oauth2 reads answers in wreck's strict JSON mode.
      await token.revoke("access_token");
      const afterwards = await fetch(`${baseUrl}/v2/users/00000000-0000-4000-8000-000000000000`, {
        headers: { authorization: `Bearer ${accessToken}` },
      });
      assert.equal(afterwards.status, 401);
    });
  }
});

describe("grpc-js", () => {
  // gRPC over HTTP/2: grpc-message is percent-encoded only for bytes outside 0x20-0x7E and "%";
  // grpc-js decodes it with decodeURI, which leaves %3A (":") and other reserved escapes as they are.
  test("an error's details arrive as the server wrote them (colon, percent sign, non-ASCII)", async () => {
    const grpcs = grpcClients(baseUrl);
    try {
      const unauthenticated = await grpcs.call("apiUser", "getApiUsers", { limit: 1 });
      assert.equal(unauthenticated.code, grpc.status.UNAUTHENTICATED);
      assert.equal(unauthenticated.details, "An access token is required (Authorization: Bearer <token>)");
      const grantType = "x:%41/é?#€";
      const refused = await grpcs.call("auth", "fetchOauth2Token", {
        grantType,
        clientId: admin.clientId,
        clientSecret: admin.clientSecret,
      });
      assert.equal(refused.ok, false);
      assert.equal(refused.details, `Unsupported grant_type "${grantType}"`);
    } finally {
      grpcs.close();
    }
  });
});
