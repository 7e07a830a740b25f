// On SIGTERM the instance first drains (SHUTDOWN_DRAIN_MS): /readyz 503 and gRPC
// health NOT_SERVING, so a load balancer takes it out, while every request is still served. Then it
// closes its connections gracefully (HTTP/1.1 `Connection: close` on what is in flight, HTTP/2
// GOAWAY), lets in-flight requests finish and exits 0. A second signal ends the drain at once.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { once } from "node:events";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { backend, newStorage, serviceEnv, TEST_OPERATOR_TOKEN, type Storage } from "../helpers/backend.js";
import { grpcJsUnary, jsonGrpcClient } from "../helpers/grpc-js.js";
import { spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

const DRAIN_MS = 3_000;
const CREATE_TMC_PATH = "/travel.operator.v1.OperatorService/CreateTmc";

/** GET on a kept-alive agent: status, headers and body. */
function get(
  agent: http.Agent,
  url: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (response) => {
        let body = "";
        response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      })
      .on("error", reject);
  });
}

describe(`drain on SIGTERM (${backend})`, () => {
  const storages: Storage[] = [];
  const servers: ServerProcess[] = [];

  async function start(extra: Record<string, string>): Promise<ServerProcess> {
    const storage = newStorage();
    storages.push(storage);
    const server = await spawnServer(serviceEnv(storage, { LOG_LEVEL: "debug", ...extra }));
    servers.push(server);
    return server;
  }

  after(async () => {
    await Promise.all(servers.map((s) => s.stop(2_000)));
    for (const storage of storages) await dropStorage(storage);
  });

  it("says not ready while it serves on, then closes connections gracefully and exits 0", async () => {
    const server = await start({ SHUTDOWN_DRAIN_MS: String(DRAIN_MS) });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const health = jsonGrpcClient(Health, new URL(server.address).host);
    const session = http2.connect(server.address);
    session.on("error", () => undefined);
    const goaway = once(session, "goaway");
    try {
      assert.equal((await get(agent, `${server.address}/readyz`)).status, 200);
      assert.equal((await grpcJsUnary(health, "Check", { service: "" })).response?.status, "SERVING");

      // A request in flight across the drain's end: its headers are in, half its body is not.
      const inFlight = net.connect({ host: "127.0.0.1", port: server.port });
      await once(inFlight, "connect");
      const body = Buffer.from(JSON.stringify({ name: "Drained Travel" }));
      inFlight.write(
        `POST ${CREATE_TMC_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
          `authorization: Bearer ${TEST_OPERATOR_TOKEN}\r\ncontent-length: ${body.length}\r\n\r\n`,
      );
      inFlight.write(body.subarray(0, 5));
      let answer = "";
      inFlight.setEncoding("latin1").on("data", (chunk: string) => (answer += chunk));
      const inFlightClosed = once(inFlight, "close");
      await server.waitForLog(
        (line) =>
          line.msg === "incoming request" && (line.req as { url?: string } | undefined)?.url === CREATE_TMC_PATH,
      );

      const signalled = Date.now();
      server.child.kill("SIGTERM");
      await server.waitForLog((line) => line.msg === "shutting down");

      // Draining: not ready, over HTTP and gRPC health, while requests are served on kept-alive and new connections.
      const readyz = await get(agent, `${server.address}/readyz`);
      assert.equal(readyz.status, 503);
      assert.deepEqual(JSON.parse(readyz.body).errorMessages[0].errorParameters, [
        { name: "shutdown", value: "draining" },
      ]);
      assert.equal((await grpcJsUnary(health, "Check", { service: "" })).response?.status, "NOT_SERVING");
      const served = await get(agent, `${server.address}/.well-known/jwks.json`);
      assert.equal(served.status, 200);
      assert.equal(served.headers.connection, "keep-alive", "no reason yet for clients to reconnect");
      assert.equal((await fetch(`${server.address}/healthz`)).status, 200, "a new connection is served too");
      assert.equal(server.child.exitCode, null);
      assert.ok(Date.now() - signalled < DRAIN_MS, "all of this within the drain");

      // After the drain: HTTP/2 sessions get GOAWAY; the request in flight finishes, told to close its connection.
      await server.waitForLog((line) => line.msg === "drained; closing connections");
      await goaway;
      inFlight.write(body.subarray(5));
      await inFlightClosed;
      assert.match(answer, /^HTTP\/1\.1 200 /, answer);
      assert.match(answer, /\r\nconnection: close\r\n/i, answer);

      const [code] = (await once(server.child, "exit")) as [number | null];
      assert.equal(code, 0, server.stderr());
      assert.ok(Date.now() - signalled >= DRAIN_MS, "exits only after the drain");
    } finally {
      agent.destroy();
      health.close();
      session.destroy();
    }
  });

  it("a second SIGTERM ends the drain at once", async () => {
    const server = await start({ SHUTDOWN_DRAIN_MS: "60000" });
    server.child.kill("SIGTERM");
    await server.waitForLog((line) => line.msg === "shutting down");
    assert.equal((await fetch(`${server.address}/readyz`)).status, 503);
    const signalled = Date.now();
    server.child.kill("SIGTERM");
    const status = await server.exited;
    assert.deepEqual(status, { code: 0, signal: null }, server.stderr());
    assert.ok(Date.now() - signalled < 10_000, `exited ${Date.now() - signalled} ms after the second signal`);
    assert.ok(server.logLines().some((line) => line.msg === "drain cut short"));
  });
});
