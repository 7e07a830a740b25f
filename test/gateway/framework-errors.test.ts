import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/** Fastify's and Node's own refusals answer with the ErrorResponse shape too, never a bare body. */
describe("refusals before any route still speak ErrorResponse", () => {
  let running: RunningService;
  before(async () => {
    running = await startService();
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  async function assertErrorResponse(response: Response, status: number, errorCode: string) {
    assert.equal(response.status, status);
    assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
    const body = (await response.json()) as {
      debugIdentifier: string;
      errorMessages: Array<{ errorCode: string; message: string }>;
    };
    assert.equal(body.errorMessages[0]?.errorCode, errorCode, JSON.stringify(body));
    assert.equal(body.debugIdentifier, response.headers.get("x-request-id"));
    return body;
  }

  test("a path that is not validly percent-encoded is 400, found in the log by its debugIdentifier", async () => {
    const body = await assertErrorResponse(
      await fetch(`${running.baseUrl}/v2/users/%FF`),
      400,
      "API_VALIDATION_FAILED",
    );
    assert.match(body.errorMessages[0]!.message, /^The URL is not valid/);
    assert.ok(running.logs().includes(body.debugIdentifier));
  });

  test("a URL over HTTP_MAX_URL_BYTES is 414", async () => {
    await assertErrorResponse(
      await fetch(`${running.baseUrl}/v2/api-users?offset=${"1".repeat(9_000)}`),
      414,
      "URI_TOO_LONG",
    );
  });

  test("headers beyond the parser's limit are 431, written on the raw socket, and the log has the id", async () => {
    const body = await assertErrorResponse(
      await fetch(`${running.baseUrl}/v2/api-users`, { headers: { "x-padding": "a".repeat(20_000) } }),
      431,
      "REQUEST_HEADERS_TOO_LARGE",
    );
    assert.ok(running.logs().includes(body.debugIdentifier));
  });

  test("bytes that are not HTTP get a 400 ErrorResponse and the connection closes", async () => {
    const { port } = new URL(running.baseUrl);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), "127.0.0.1", () => socket.write("GARBAGE\u0000 / HTTP/1.1\r\n\r\n"));
      let received = "";
      socket.on("data", (chunk) => (received += chunk.toString("latin1")));
      socket.on("end", () => resolve(received));
      socket.on("error", reject);
    });
    assert.match(raw, /^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));
    assert.equal(body.errorMessages[0].errorCode, "API_VALIDATION_FAILED");
    assert.match(raw, new RegExp(`x-request-id: ${body.debugIdentifier}\\r\\n`));
  });

  test("unknown routes are 404 ROUTE_NOT_FOUND on every method", async () => {
    for (const method of ["GET", "POST", "PUT", "DELETE", "PATCH"]) {
      await assertErrorResponse(await fetch(`${running.baseUrl}/v9/nothing`, { method }), 404, "ROUTE_NOT_FOUND");
    }
  });
});
