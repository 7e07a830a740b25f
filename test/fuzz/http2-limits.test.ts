import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { backend } from "../helpers/backend.js";
import { rapidReset } from "../helpers/rapid-reset.js";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/**
 * The HTTP/2 abuse cases beside rapid reset (test/fuzz/http2-abuse.test.ts):
 * many streams at once, tiny flow-control windows with responses never read, too many sessions
 * from one address, and the admin listener holding the same limits. Each client here writes raw
 * frames on its own socket (no client-side limits) from an address of its own (127.0.0.x), so the
 * per-address limits do not mix the cases. Small on purpose: a few hundred streams, a second or two.
 */
const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, GOAWAY: 0x7, WINDOW_UPDATE: 0x8 } as const;
const END_STREAM = 0x1;
const END_HEADERS = 0x4;
const ACK = 0x1;
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** GET `path`: ":method: GET", ":scheme: http" indexed, ":path" and ":authority" literal. */
function getHeaders(path: string, authority: string): Buffer {
  const literal = (index: number, value: string) =>
    Buffer.concat([Buffer.from([index, value.length]), Buffer.from(value, "latin1")]);
  return Buffer.concat([Buffer.from([0x82, 0x86]), literal(0x04, path), literal(0x01, authority)]);
}

interface Received {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A raw HTTP/2 connection that records every frame the server sends. */
class RawClient {
  readonly frames: Received[] = [];
  closed = false;
  readonly closedAt: Promise<void>;
  private buffered: Buffer = Buffer.alloc(0);
  private constructor(
    readonly socket: net.Socket,
    readonly authority: string,
  ) {
    socket.on("error", () => undefined);
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    this.closedAt = new Promise((resolve) => socket.once("close", () => ((this.closed = true), resolve())));
  }

  /** Connects from `localAddress` and sends the preface with `settings` (id → value). */
  static async open(baseUrl: string, localAddress: string, settings: Record<number, number> = {}): Promise<RawClient> {
    const url = new URL(baseUrl);
    const socket = net.connect({ host: url.hostname, port: Number(url.port), localAddress });
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const entries = Object.entries(settings).map(([id, value]) => {
      const entry = Buffer.alloc(6);
      entry.writeUInt16BE(Number(id), 0);
      entry.writeUInt32BE(value, 2);
      return entry;
    });
    socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0, Buffer.concat(entries))]));
    return new RawClient(socket, url.host);
  }

  private read(chunk: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= 9) {
      const length = this.buffered.readUIntBE(0, 3);
      if (this.buffered.length < 9 + length) return;
      const received = {
        type: this.buffered[3]!,
        flags: this.buffered[4]!,
        streamId: this.buffered.readUInt32BE(5) & 0x7fffffff,
        payload: this.buffered.subarray(9, 9 + length),
      };
      this.frames.push(received);
      // The server's SETTINGS are acknowledged, as any client must.
      if (received.type === FRAME.SETTINGS && !(received.flags & ACK)) this.socket.write(frame(FRAME.SETTINGS, ACK, 0));
      this.buffered = this.buffered.subarray(9 + length);
    }
  }

  /** Opens `count` GET streams (ids 1, 3, 5, …) in one write. */
  get(path: string, count: number, firstId = 1): void {
    const block = getHeaders(path, this.authority);
    this.socket.write(
      Buffer.concat(
        Array.from({ length: count }, (_, i) => frame(FRAME.HEADERS, END_HEADERS | END_STREAM, firstId + 2 * i, block)),
      ),
    );
  }

  goawayCode(): number | undefined {
    const goaway = this.frames.find((f) => f.type === FRAME.GOAWAY);
    return goaway?.payload.readUInt32BE(4);
  }

  serverSetting(id: number): number | undefined {
    for (const f of this.frames.filter((f) => f.type === FRAME.SETTINGS && !(f.flags & ACK))) {
      for (let at = 0; at + 6 <= f.payload.length; at += 6)
        if (f.payload.readUInt16BE(at) === id) return f.payload.readUInt32BE(at + 2);
    }
    return undefined;
  }

  async waitFor(predicate: () => boolean, ms: number): Promise<boolean> {
    const until = performance.now() + ms;
    while (!predicate() && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    return predicate();
  }
}

/** A well-behaved client's GET over HTTP/1.1 and over HTTP/2: both 200 within 1 s each. */
async function othersAreServed(baseUrl: string): Promise<void> {
  const started = performance.now();
  const rest = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(rest.status, 200);
  await rest.arrayBuffer();
  const session = http2.connect(baseUrl);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      session.on("error", reject);
      const stream = session.request({ ":path": "/healthz" });
      stream.on("response", (headers) => resolve(Number(headers[":status"])));
      stream.on("error", reject);
      stream.resume();
    });
    assert.equal(status, 200);
  } finally {
    session.destroy();
  }
  const ms = performance.now() - started;
  assert.ok(ms < 2_000, `a well-behaved client waited ${Math.round(ms)} ms for two /healthz`);
}

describe(`HTTP/2 limits per client (${backend})`, () => {
  let running: RunningService;
  let admin: string;
  before(async () => {
    // A short idle timeout so that the stalled-reader case ends within the test.
    running = await startService({ env: { ADMIN_PORT: "0", HTTP2_IDLE_TIMEOUT_MS: "1500" } });
    admin = running.service.adminAddress!;
  });
  after(async () => {
    await running?.stop();
    if (running) await dropStorage(running.storage);
  });

  test("many streams, well-behaved client: 300 requests at once on one node:http2 session are queued by the client past the 100 announced, and all answered", async () => {
    const session = http2.connect(running.baseUrl, {
      createConnection: () =>
        net.connect({ host: "127.0.0.1", port: Number(new URL(running.baseUrl).port), localAddress: "127.0.0.10" }),
    });
    try {
      session.on("error", () => undefined);
      const statuses = await Promise.all(
        Array.from(
          { length: 300 },
          () =>
            new Promise<number>((resolve) => {
              const stream = session.request({ ":path": "/healthz" });
              stream.on("response", (headers) => resolve(Number(headers[":status"])));
              stream.on("error", () => resolve(0));
              stream.resume();
            }),
        ),
      );
      assert.equal(session.remoteSettings.maxConcurrentStreams, 100);
      assert.deepEqual(
        [...new Set(statuses)],
        [200],
        `statuses: ${JSON.stringify(statuses.filter((s) => s !== 200).slice(0, 5))}`,
      );
    } finally {
      session.destroy();
    }
  });

  test("many streams, raw client ignoring the setting: 300 HEADERS at once on one connection are refused (nghttp2 ends the connection with GOAWAY PROTOCOL_ERROR, RFC 9113 5.1.2), the server lives, and others are served", async () => {
    const client = await RawClient.open(running.baseUrl, "127.0.0.11");
    assert.ok(
      await client.waitFor(() => client.serverSetting(0x3) !== undefined, 5_000),
      "no SETTINGS from the server",
    );
    assert.equal(client.serverSetting(0x3), 100, "SETTINGS_MAX_CONCURRENT_STREAMS");
    await new Promise((resolve) => setTimeout(resolve, 100)); // our SETTINGS ACK reaches the server
    client.get("/healthz", 300);
    await client.waitFor(() => client.closed || client.goawayCode() !== undefined, 10_000);
    const served = new Set(client.frames.filter((f) => f.type === FRAME.HEADERS).map((f) => f.streamId));
    const refused = client.frames.filter(
      (f) => f.type === FRAME.RST_STREAM && f.payload.readUInt32BE(0) === http2.constants.NGHTTP2_REFUSED_STREAM,
    );
    assert.ok(served.size <= 100, `streams answered: ${served.size}`);
    assert.ok(
      client.goawayCode() === http2.constants.NGHTTP2_PROTOCOL_ERROR || refused.length >= 200,
      `GOAWAY ${client.goawayCode()}, ${refused.length} REFUSED_STREAM`,
    );
    client.socket.destroy();
    await othersAreServed(running.baseUrl);
  });

  test("tiny windows: 100 streams of /openapi.json with a 1-byte window and nothing read; the server sends no more than the window allows, serves others, and ends the session when it stalls", async () => {
    // SETTINGS_INITIAL_WINDOW_SIZE = 1, and the socket is never read after the SETTINGS: responses cannot move.
    const client = await RawClient.open(running.baseUrl, "127.0.0.12", { 0x4: 1 });
    assert.ok(
      await client.waitFor(() => client.serverSetting(0x3) !== undefined, 5_000),
      "no SETTINGS from the server",
    );
    client.get("/openapi.json", 100);
    await new Promise((resolve) => setTimeout(resolve, 300));
    client.socket.pause();
    await othersAreServed(running.baseUrl);
    const dataBytes = client.frames.filter((f) => f.type === FRAME.DATA).reduce((sum, f) => sum + f.payload.length, 0);
    assert.ok(dataBytes <= 100, `the server sent ${dataBytes} bytes of DATA into 100 one-byte windows`);
    // The session has been idle (nothing can move) for longer than HTTP2_IDLE_TIMEOUT_MS: the server closes it.
    client.socket.resume();
    assert.ok(await client.waitFor(() => client.closed, 6_000), "the stalled session was not closed");
  });

  for (const face of ["public", "admin"] as const) {
    test(`session cap (${face} port): 64 sessions from one address are served, the 65th gets GOAWAY ENHANCE_YOUR_CALM`, async () => {
      const baseUrl = face === "public" ? running.baseUrl : admin;
      const from = face === "public" ? "127.0.0.13" : "127.0.0.14";
      const clients = await Promise.all(Array.from({ length: 64 }, () => RawClient.open(baseUrl, from)));
      try {
        for (const client of clients)
          assert.ok(await client.waitFor(() => client.serverSetting(0x3) !== undefined, 5_000), "no SETTINGS");
        const extra = await RawClient.open(baseUrl, from);
        assert.ok(await extra.waitFor(() => extra.goawayCode() !== undefined, 5_000), "no GOAWAY for the 65th session");
        assert.equal(extra.goawayCode(), http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
        assert.ok(
          clients.every((c) => c.goawayCode() === undefined && !c.closed),
          "one of the first 64 sessions was ended",
        );
        extra.socket.destroy();
      } finally {
        for (const client of clients) client.socket.destroy();
      }
      await othersAreServed(baseUrl);
    });
  }

  test("admin port: rapid reset from one address ends with GOAWAY ENHANCE_YOUR_CALM, and the admin port still serves others", async () => {
    const report = await rapidReset({
      url: admin,
      durationMs: 1_000,
      mode: "raw",
      path: "/readyz",
      localAddress: "127.0.0.15",
    });
    assert.ok((report.goaways.ENHANCE_YOUR_CALM ?? 0) >= 1, JSON.stringify(report));
    await othersAreServed(admin);
  });
});

/**
 * Many addresses resetting at once each stayed within their own budget, yet together
 * slowed every client of the instance. The instance's own budget (small here, the per-address one
 * out of reach) ends the sessions resetting the most, not the others.
 */
describe(`HTTP/2 reset budget of the whole instance (${backend})`, () => {
  let running: RunningService;
  before(async () => {
    running = await startService({
      env: {
        HTTP2_RESET_BURST: "1000",
        HTTP2_RESETS_PER_SECOND: "20",
        HTTP2_INSTANCE_RESET_BURST: "100",
        HTTP2_INSTANCE_RESETS_PER_SECOND: "10",
      },
    });
  });
  after(async () => {
    await running?.stop();
    if (running) await dropStorage(running.storage);
  });

  /** `count` GET streams, each reset (RST_STREAM CANCEL) in the same write, from stream `firstId` on. */
  function resetStreams(client: RawClient, count: number, firstId: number): void {
    const block = getHeaders("/healthz", client.authority);
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(http2.constants.NGHTTP2_CANCEL);
    const frames = Array.from({ length: count }, (_, i) => [
      frame(FRAME.HEADERS, END_HEADERS | END_STREAM, firstId + 2 * i, block),
      frame(FRAME.RST_STREAM, 0, firstId + 2 * i, cancel),
    ]).flat();
    client.socket.write(Buffer.concat(frames));
  }

  test("two addresses reset 70 streams each (within their own budget of 1000, over the instance's 100): both sessions get GOAWAY ENHANCE_YOUR_CALM and their addresses are refused a while; a session that reset 5 is still served", async () => {
    const quiet = await RawClient.open(running.baseUrl, "127.0.0.31");
    const first = await RawClient.open(running.baseUrl, "127.0.0.32");
    const second = await RawClient.open(running.baseUrl, "127.0.0.33");
    try {
      resetStreams(quiet, 5, 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      resetStreams(first, 70, 1);
      resetStreams(second, 70, 1);
      const calm = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM;
      for (const [name, client] of [
        ["first", first],
        ["second", second],
      ] as const)
        assert.ok(
          await client.waitFor(() => client.goawayCode() === calm, 5_000),
          `${name} resetting session: GOAWAY ${client.goawayCode()}, closed ${client.closed}`,
        );
      // The quiet session still answers: a GET on it gets its HEADERS.
      quiet.get("/healthz", 1, 11);
      assert.ok(
        await quiet.waitFor(() => quiet.frames.some((f) => f.type === FRAME.HEADERS && f.streamId === 11), 5_000),
        `the quiet session: ${JSON.stringify(quiet.frames.map((f) => [f.type, f.streamId]))}`,
      );
      assert.equal(quiet.goawayCode(), undefined);
      // The offender's address is refused at once when it comes back.
      const again = await RawClient.open(running.baseUrl, "127.0.0.32");
      assert.ok(await again.waitFor(() => again.goawayCode() === calm, 5_000), "the offender's reconnect");
      again.socket.destroy();
      assert.match(running.logs(), /instance reset budget spent/);
    } finally {
      for (const client of [quiet, first, second]) client.socket.destroy();
    }
  });
});
