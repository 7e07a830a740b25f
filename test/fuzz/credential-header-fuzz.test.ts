// Property-based fuzzing of every header that carries a credential (a NUL in HTTP Basic
// reached Postgres and answered 500; the fuzzers sent only fixed wrong credentials). Generated
// ids, secrets and tokens — control bytes, NUL, lone surrogates, percent sequences, long values,
// raw bytes — go into:
//   - HTTP Basic on the token, introspection and revocation endpoints (REST), and in Connect JSON
//     and gRPC metadata (grpc-js) on AuthService;
//   - Bearer on a protected REST route and on Connect, and the operator token on OperatorService,
//     written on a raw socket so the bytes reach the server as generated (fetch refuses them).
// The property: never a 5xx, and every refusal an ErrorResponse (REST) or an error with a code.
// The SCIM bearer has its own fuzzer (test/scim/scim-fuzz.test.ts, scim-envelope-fuzz).
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { backend } from "../helpers/backend.js";
import { dropStorage, operatorCall, startService, type RunningService } from "../helpers/service.js";
import { grpcClients, type GrpcClients } from "../helpers/token-kit.js";
import { FUZZ_RUNS, FUZZ_SEED, FUZZ_SERVICE_ENV, fuzzParams, longString, shortFuzzString, show } from "./fuzz-kit.js";

/** A credential as text (may hold anything), or raw bytes (not even UTF-8). */
const credentialText = fc.oneof({ weight: 4, arbitrary: shortFuzzString }, { weight: 1, arbitrary: longString });
const basicValue = fc.oneof(
  fc
    .record({ id: credentialText, secret: credentialText })
    .map(({ id, secret }) => `Basic ${Buffer.from(`${id}:${secret}`, "utf8").toString("base64")}`),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => `Basic ${Buffer.from(bytes).toString("base64")}`),
  credentialText.map((text) => `Basic ${text}`),
);
/** A header value as bytes on the wire: latin1 of the text, minus CR and LF (they would end the header, not test it). */
const headerBytes = (text: string) => Buffer.from(text.replace(/[\r\n]/g, ""), "latin1");

/** Node's default --max-http-header-size. */
const NODE_MAX_HEADER_BYTES = 16 * 1024;

/** One HTTP/1.1 request on a raw socket; the answer's status and body. */
function rawRequest(
  baseUrl: string,
  method: string,
  path: string,
  headers: Array<[string, Buffer | string]>,
  body = "",
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  const headerSize = headers.reduce((sum, [name, value]) => sum + name.length + value.length + 4, 0);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // Headers past Node's 16 KiB limit are refused by the HTTP parser while the client is still
      // writing them: the 431 may be lost to the TCP reset that closing on unread bytes causes.
      // That is a refusal too (nothing reached the service), not a 5xx.
      if (error.code === "ECONNRESET" && headerSize > NODE_MAX_HEADER_BYTES)
        resolve({ status: 431, body: '{"code":"connection reset past the header limit"}' });
      else reject(error);
    });
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
    const head = [
      `${method} ${path} HTTP/1.1`,
      `host: ${hostname}`,
      "connection: close",
      `content-length: ${Buffer.byteLength(body)}`,
    ];
    const parts: Buffer[] = [Buffer.from(head.join("\r\n") + "\r\n")];
    for (const [name, value] of headers)
      parts.push(Buffer.from(`${name}: `), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from("\r\n"));
    parts.push(Buffer.from("\r\n"), Buffer.from(body));
    socket.write(Buffer.concat(parts)); // no half-close: "connection: close" ends it after the answer
  });
}

/** Not a 5xx, and a JSON error body with something to read (an ErrorResponse, or Connect's {code, message}). */
function assertRefusal(answer: { status: number; body: string }, allowed: readonly number[], what: string): void {
  assert.ok(allowed.includes(answer.status), `${what}: status ${answer.status}, body ${answer.body.slice(0, 300)}`);
  const json = JSON.parse(answer.body.slice(answer.body.indexOf("{"), answer.body.lastIndexOf("}") + 1)) as Record<
    string,
    any
  >;
  assert.ok(
    Array.isArray(json.errorMessages) || typeof json.code === "string",
    `${what}: ${answer.body.slice(0, 300)}`,
  );
}

describe(`credential-header fuzzing (${backend}, FUZZ_RUNS=${FUZZ_RUNS}, FUZZ_SEED=${FUZZ_SEED})`, () => {
  let running: RunningService;
  let grpc: GrpcClients;
  before(async () => {
    running = await startService({ env: FUZZ_SERVICE_ENV });
    await operatorCall(running.baseUrl, "Seed", {});
    grpc = grpcClients(running.baseUrl);
  });
  after(async () => {
    grpc?.close();
    await running.stop();
    await dropStorage(running.storage);
  });

  test("HTTP Basic on the token, introspection and revocation endpoints (REST and Connect) and in gRPC metadata: a 4xx, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(
        basicValue,
        fc.constantFrom("oauth2-token", "introspect", "revoke"),
        async (authorization, endpoint) => {
          const form = endpoint === "oauth2-token" ? "grant_type=client_credentials" : "token=x";
          const rest = await rawRequest(
            running.baseUrl,
            "POST",
            `/v2/auth/${endpoint}`,
            [
              ["authorization", headerBytes(authorization)],
              ["content-type", "application/x-www-form-urlencoded"],
            ],
            form,
          );
          assertRefusal(rest, [400, 401, 403, 429, 431], `REST ${endpoint} ${show(authorization)}`);
          const connect = await rawRequest(
            running.baseUrl,
            "POST",
            "/travel.auth.v2.AuthService/IntrospectToken",
            [
              ["authorization", headerBytes(authorization)],
              ["content-type", "application/json"],
            ],
            '{"token":"x"}',
          );
          assertRefusal(connect, [400, 401, 403, 429, 431], `Connect ${show(authorization)}`);
          // Metadata over HTTP/2's header limit ends the stream in the transport (grpc-js: INTERNAL), before the service.
          if (/^Basic [A-Za-z0-9+/=]*$/.test(authorization) && authorization.length <= 8192) {
            const outcome = await grpc.call(
              "auth",
              "fetchOauth2Token",
              { grantType: "client_credentials" },
              undefined,
              { authorization },
            );
            assert.ok(
              !outcome.ok && [3, 7, 8, 16].includes(outcome.code!),
              `gRPC ${show(authorization)}: ${outcome.code} ${show(outcome.errorResponse)}`,
            );
          }
        },
      ),
      fuzzParams(),
    );
  });

  test("Bearer on a protected route (REST and Connect) and the operator token (Connect): a 4xx (431 for headers over the limit), never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(credentialText, fc.constantFrom("Bearer ", "bearer ", "Bearer  ", ""), async (token, scheme) => {
        const authorization = headerBytes(`${scheme}${token}`);
        const rest = await rawRequest(running.baseUrl, "GET", "/v2/api-users?limit=1", [
          ["authorization", authorization],
        ]);
        assertRefusal(rest, [400, 401, 429, 431], `REST bearer ${show(token)}`);
        const connect = await rawRequest(
          running.baseUrl,
          "POST",
          "/travel.apiuser.v2.ApiUserService/GetApiUsers",
          [
            ["authorization", authorization],
            ["content-type", "application/json"],
          ],
          "{}",
        );
        assertRefusal(connect, [400, 401, 429, 431], `Connect bearer ${show(token)}`);
        const operator = await rawRequest(
          running.baseUrl,
          "POST",
          "/travel.operator.v1.OperatorService/ListTmcs",
          [
            ["authorization", authorization],
            ["content-type", "application/json"],
          ],
          "{}",
        );
        assertRefusal(operator, [400, 401, 429, 431], `operator token ${show(token)}`);
      }),
      fuzzParams(),
    );
  });
});
