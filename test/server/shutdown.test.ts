// Graceful shutdown of the real server process (src/main.ts): on SIGTERM it stops accepting
// connections, lets the request already in flight finish (with working database pools), and
// exits 0. Runs on the backend chosen by TEST_BACKEND (test/run.sh runs both).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { backend, newStorage, serviceEnv, TEST_OPERATOR_TOKEN, type Storage } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { spawnServer, type ExitStatus, type ServerProcess } from "../helpers/server-process.js";
import { waitFor } from "../helpers/wait.js";

const CREATE_TMC_PATH = "/travel.operator.v1.OperatorService/CreateTmc";

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses one HTTP/1.1 response (Content-Length, chunked, or read-to-close body). */
function parseResponse(raw: Buffer): RawResponse {
  const text = raw.toString("latin1");
  const headerEnd = text.indexOf("\r\n\r\n");
  assert.ok(headerEnd > 0, `incomplete HTTP response: ${JSON.stringify(text)}`);
  const [statusLine, ...headerLines] = text.slice(0, headerEnd).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.subarray(Buffer.byteLength(text.slice(0, headerEnd + 4), "latin1"));
  if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
    const parts: Buffer[] = [];
    let rest = body;
    for (;;) {
      const lineEnd = rest.indexOf("\r\n");
      const size = Number.parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
      if (!size) break;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else if (headers["content-length"] !== undefined) {
    body = body.subarray(0, Number(headers["content-length"]));
  }
  return { status, headers, body: body.toString("utf8") };
}

/** Resolves with everything the peer sent once it closes the connection. */
function readUntilClosed(socket: net.Socket, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `connection not closed within ${timeoutMs} ms; received ${JSON.stringify(Buffer.concat(chunks).toString("latin1"))}`,
        ),
      );
    }, timeoutMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    socket.once("error", (error) => {
      // A reset after the whole response arrived is still a complete exchange.
      if (chunks.length === 0) {
        clearTimeout(timer);
        reject(error);
      }
    });
  });
}

/**
 * What a brand-new connection gets from a server that is shutting down: "refused" when the port
 * is closed, otherwise the status of a simple request on it.
 */
async function probeNewConnection(port: number): Promise<number | string> {
  const socket = net.connect({ host: "127.0.0.1", port });
  try {
    await once(socket, "connect");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ECONNREFUSED" ? "refused" : `connect failed: ${code}`;
  }
  const body = JSON.stringify({ name: "probe" });
  socket.write(
    `POST ${CREATE_TMC_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
      `authorization: Bearer ${TEST_OPERATOR_TOKEN}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  try {
    const raw = await readUntilClosed(socket, 5_000);
    if (raw.length === 0) return "closed without a response";
    return parseResponse(raw).status;
  } catch (error) {
    return `probe failed: ${(error as Error).message}`;
  } finally {
    socket.destroy();
  }
}

async function exitWithin(server: ServerProcess, ms: number): Promise<ExitStatus> {
  const timeout = sleep(ms).then(() => undefined);
  const status = await Promise.race([server.exited, timeout]);
  assert.ok(
    status,
    `the server did not exit within ${ms} ms of SIGTERM\nstdout tail:\n${server.stdout().slice(-3000)}\nstderr:\n${server.stderr()}`,
  );
  return status;
}

describe(`server shutdown on SIGTERM (${backend})`, () => {
  const storages: Storage[] = [];
  const servers: ServerProcess[] = [];

  async function start(extra: Record<string, string> = {}): Promise<ServerProcess> {
    const storage = newStorage();
    storages.push(storage);
    const server = await spawnServer(serviceEnv(storage, extra));
    servers.push(server);
    return server;
  }

  after(async () => {
    await Promise.all(servers.map((s) => s.stop(2_000)));
    for (const storage of storages) await dropStorage(storage);
  });

  it("with no requests in flight, exits 0 promptly", async () => {
    const server = await start();
    const started = Date.now();
    server.child.kill("SIGTERM");
    const status = await exitWithin(server, 5_000);
    assert.deepEqual(status, { code: 0, signal: null }, `stderr:\n${server.stderr()}`);
    assert.ok(Date.now() - started < 5_000);
    assert.ok(
      server.logLines().some((line) => line.msg === "shutting down" && line.signal === "SIGTERM"),
      "logs that it is shutting down",
    );
  });

  it("stops accepting, finishes the request in flight with working pools, then exits 0", async () => {
    // At debug level the server logs each request as it arrives ("incoming request").
    const server = await start({ LOG_LEVEL: "debug" });
    const body = Buffer.from(JSON.stringify({ name: "Shutdown Travel", maxApiUsers: 6 }), "utf8");
    const half = Math.floor(body.length / 2);

    const socket = net.connect({ host: "127.0.0.1", port: server.port });
    await once(socket, "connect");
    const response = readUntilClosed(socket, 20_000);
    socket.write(
      `POST ${CREATE_TMC_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n` +
        `content-type: application/json\r\nauthorization: Bearer ${TEST_OPERATOR_TOKEN}\r\n` +
        `content-length: ${body.length}\r\nconnection: close\r\n\r\n`,
    );
    socket.write(body.subarray(0, half));
    // The server has routed the request (headers parsed, handler waiting for the body).
    await server.waitForLog(
      (line) => line.msg === "incoming request" && (line.req as { url?: string } | undefined)?.url === CREATE_TMC_PATH,
    );

    server.child.kill("SIGTERM");
    await server.waitForLog((line) => line.msg === "shutting down");

    // Poll until the server has stopped accepting: new connections are refused (or answered 503).
    const probes: Array<number | string> = [];
    await waitFor(
      "new connections to be refused after SIGTERM",
      async () => {
        const probe = await probeNewConnection(server.port);
        probes.push(probe);
        return probe === "refused" || probe === 503;
      },
      { timeoutMs: 5_000 },
    );
    assert.equal(
      server.child.exitCode,
      null,
      `the server waits for the request in flight (probes: ${probes.join(", ")})`,
    );

    socket.write(body.subarray(half));
    const raw = await response;
    const { status, headers, body: responseBody } = parseResponse(raw);
    assert.equal(
      status,
      200,
      `in-flight request: ${status} ${responseBody}\nserver stdout tail:\n${server.stdout().slice(-3000)}`,
    );
    assert.match(headers["content-type"] ?? "", /^application\/json/);
    const json = JSON.parse(responseBody) as { tmcId?: string; name?: string; maxApiUsers?: number };
    assert.match(json.tmcId ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(json.name, "Shutdown Travel");
    assert.equal(json.maxApiUsers, 6);

    const exit = await exitWithin(server, 5_000);
    assert.deepEqual(exit, { code: 0, signal: null }, `stderr:\n${server.stderr()}`);
    assert.ok(
      !server.logLines().some((line) => line.level === 50 || line.level === 60),
      `no errors logged during shutdown:\n${server.stdout().slice(-3000)}`,
    );
  });
});
