import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { dropStorage, operatorHeaders, startService, type RunningService } from "../helpers/service.js";

/** Sends raw bytes and collects the whole reply until the server closes the connection. */
function rawExchange(port: number, chunks: string[], delayMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    let reply = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => (reply += d));
    socket.on("end", () => resolve(reply));
    socket.on("error", reject);
    socket.on("connect", () => {
      (async () => {
        for (const chunk of chunks) {
          socket.write(chunk);
          if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        }
      })().catch(reject);
    });
  });
}

describe("one port for HTTP/1.1 and HTTP/2 cleartext", () => {
  let running: RunningService;
  let port: number;
  before(async () => {
    running = await startService();
    port = Number(new URL(running.baseUrl).port);
  });
  after(async () => {
    await running.stop();
    await dropStorage(running.storage);
  });

  test("a request sent one byte at a time is understood (the sniffer waits for the whole preface)", async () => {
    const body = JSON.stringify({ name: "Byte TMC" });
    const request =
      `POST /travel.operator.v1.OperatorService/CreateTmc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nAuthorization: ${operatorHeaders.authorization}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const reply = await rawExchange(port, [...request], 1);
    assert.match(reply, /^HTTP\/1\.1 200 /);
    assert.match(reply, /"tmcId":"[0-9a-f-]{36}"/);
  });

  test("keep-alive HTTP/1.1 serves several requests on one connection", async () => {
    const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    const reply = await rawExchange(
      port,
      [get, get, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
      20,
    );
    assert.equal(reply.match(/HTTP\/1\.1 200 /g)?.length, 3);
  });

  test("HTTP/2 prior knowledge reaches the same routes (REST path and RPC)", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const request = (headers: http2.OutgoingHttpHeaders, body?: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const stream = session.request(headers);
          let data = "";
          let status = 0;
          stream.setEncoding("utf8");
          stream.on("response", (h) => (status = Number(h[":status"])));
          stream.on("data", (d: string) => (data += d));
          stream.on("end", () => resolve({ status, body: data }));
          stream.on("error", reject);
          stream.end(body);
        });
      const results = await Promise.all([
        request({ ":path": "/healthz" }),
        request(
          {
            ":path": "/travel.operator.v1.OperatorService/CreateTmc",
            ":method": "POST",
            "content-type": "application/json",
            ...operatorHeaders,
          },
          JSON.stringify({ name: "H2 TMC" }),
        ),
      ]);
      assert.deepEqual(results[0], { status: 200, body: '{"status":"ok"}' });
      assert.equal(results[1]!.status, 200);
      assert.equal(JSON.parse(results[1]!.body).name, "H2 TMC");
    } finally {
      session.close();
    }
  });

  test("many parallel mixed HTTP/1.1 and HTTP/2 requests all succeed", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const h2 = () =>
        new Promise<number>((resolve, reject) => {
          const stream = session.request({ ":path": "/healthz" });
          stream.on("response", (h) => resolve(Number(h[":status"])));
          stream.on("error", reject);
          stream.resume();
          stream.end();
        });
      const statuses = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          i % 2 ? h2() : fetch(`${running.baseUrl}/healthz`).then(async (r) => (await r.text(), r.status)),
        ),
      );
      assert.deepEqual(new Set(statuses), new Set([200]));
    } finally {
      session.close();
    }
  });

  test("a connection that never sends anything useful is closed, not leaked", async () => {
    const reply = await rawExchange(port, ["garbage that is no request\r\n\r\n"]);
    assert.match(reply, /^HTTP\/1\.1 400 /);
  });
});
