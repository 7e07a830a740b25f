import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { Duplex } from "node:stream";
import { after, before, describe, test } from "node:test";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";
import { ROOMY_RATE_LIMITS } from "../helpers/token-kit.js";

/**
 * An h2c request whose body ends with an empty DATA frame carrying END_STREAM (what Node's own
 * `stream.end(Buffer.alloc(0))` and many proxies send) got no answer for 30 s and then RST_STREAM
 * CANCEL, on gRPC, Connect and REST alike, before any authentication. The server dispatches a new
 * stream on the loop turn after the read that opened it (the rapid-reset gate), and Node emits a
 * stream's 'end' inside the read that brings END_STREAM when no body is buffered: the readers
 * attached at dispatch waited for an 'end' that had gone by. The frames are written here by hand
 * on a plain socket, so that their order and their TCP writes are exactly as stated; the server's
 * bytes are then read by a node:http2 client (its HPACK decoder) to see the answer as a client would.
 */
const ANSWER_WITHIN_MS = 1_000;
/** How long this side waits before it calls the stream hung (the server's request timer is 30 s). */
const GIVE_UP_MS = 5_000;

const FRAME = { DATA: 0x0, HEADERS: 0x1, RST_STREAM: 0x3, SETTINGS: 0x4, GOAWAY: 0x7 } as const;
const END_STREAM = 0x1;
const END_HEADERS = 0x4;
const ACK = 0x1;
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const STREAM_ID = 1;

function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK: ":method: POST" and ":scheme: http" from the static table, every other header a literal without indexing. */
function postHeaders(headers: Record<string, string>): Buffer {
  const literal = (name: string, value: string) =>
    Buffer.concat([
      Buffer.from([0x00, name.length]),
      Buffer.from(name, "latin1"),
      Buffer.from([value.length]),
      Buffer.from(value, "latin1"),
    ]);
  return Buffer.concat([Buffer.from([0x83, 0x86]), ...Object.entries(headers).map(([n, v]) => literal(n, v))]);
}

interface Answer {
  readonly status?: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly trailers: http2.IncomingHttpHeaders;
  readonly body: string;
  /** The RST_STREAM code the server sent for the stream, if it reset it. */
  readonly rstCode?: number;
  readonly hung: boolean;
  readonly ms: number;
}

/**
 * One request on a new raw connection: the preface, HEADERS, then `frames` (the DATA frames), each
 * inner array one TCP write, the writes a loop turn apart. Resolves with the answer once the
 * server has ended or reset the stream, or after GIVE_UP_MS.
 */
async function rawRequest(baseUrl: string, headers: Record<string, string>, writes: Buffer[][]): Promise<Answer> {
  const url = new URL(baseUrl);
  const socket = net.connect({ host: url.hostname, port: Number(url.port) });
  socket.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const received: Buffer[] = [];
  let rstCode: number | undefined;
  const started = performance.now();
  const ended = new Promise<boolean>((resolve) => {
    let unread: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      received.push(chunk);
      unread = Buffer.concat([unread, chunk]);
      while (unread.length >= 9 && unread.length >= 9 + unread.readUIntBE(0, 3)) {
        const [type, flags, id] = [unread[3]!, unread[4]!, unread.readUInt32BE(5) & 0x7fffffff];
        if (type === FRAME.RST_STREAM && id === STREAM_ID) rstCode = unread.readUInt32BE(9);
        if (type === FRAME.RST_STREAM || type === FRAME.GOAWAY) resolve(true);
        if ((type === FRAME.DATA || type === FRAME.HEADERS) && id === STREAM_ID && flags & END_STREAM) resolve(true);
        unread = unread.subarray(9 + unread.readUIntBE(0, 3));
      }
    });
    socket.once("close", () => resolve(true));
    setTimeout(() => resolve(false), GIVE_UP_MS).unref();
  });
  const opening = [
    PREFACE,
    frame(FRAME.SETTINGS, 0, 0),
    frame(FRAME.SETTINGS, ACK, 0),
    frame(FRAME.HEADERS, END_HEADERS, STREAM_ID, postHeaders({ ":authority": url.host, ...headers })),
  ];
  for (const [i, write] of writes.entries()) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    socket.write(Buffer.concat(i === 0 ? [...opening, ...write] : write));
  }
  const finished = await ended;
  const ms = performance.now() - started;
  socket.destroy();
  return { ...(await decodeAnswer(Buffer.concat(received))), rstCode, hung: !finished, ms };
}

/**
 * The server's bytes as node:http2's client reads them: a client session on a stream that feeds it
 * those bytes (and swallows what it writes) opens stream 1 and hears the answer recorded for it.
 */
async function decodeAnswer(serverBytes: Buffer): Promise<Pick<Answer, "status" | "headers" | "trailers" | "body">> {
  let written: Buffer = Buffer.alloc(0);
  const wire = new Duplex({
    read() {},
    write: (chunk: Buffer, _encoding, callback) => {
      written = Buffer.concat([written, chunk]);
      callback();
    },
  });
  const session = http2.connect("http://decoder.invalid", { createConnection: () => wire as net.Socket });
  session.on("error", () => undefined);
  const stream = session.request({ ":method": "POST", ":path": "/" }, { endStream: false });
  stream.on("error", () => undefined);
  let headers: http2.IncomingHttpHeaders = {};
  let trailers: http2.IncomingHttpHeaders = {};
  const chunks: Buffer[] = [];
  stream.on("response", (h) => (headers = h));
  stream.on("trailers", (t) => (trailers = t));
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  // The answer may come in only once the client has sent its HEADERS for stream 1.
  while (!sentHeaders(written)) await new Promise((resolve) => setImmediate(resolve));
  wire.push(serverBytes);
  await new Promise<void>((resolve) => {
    stream.once("end", resolve);
    stream.once("close", resolve);
    setTimeout(resolve, 1_000).unref();
  });
  session.destroy();
  const status = headers[":status"] === undefined ? undefined : Number(headers[":status"]);
  return { status, headers, trailers, body: Buffer.concat(chunks).toString("utf8") };
}

/** Whether the client's bytes (the preface, then frames) hold its HEADERS frame for stream 1. */
function sentHeaders(clientBytes: Buffer): boolean {
  for (let at = PREFACE.length; at + 9 <= clientBytes.length; at += 9 + clientBytes.readUIntBE(at, 3))
    if (clientBytes[at + 3] === FRAME.HEADERS && (clientBytes.readUInt32BE(at + 5) & 0x7fffffff) === STREAM_ID)
      return true;
  return false;
}

/** A gRPC length-prefixed message. */
function grpcMessage(data: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(data.length, 1);
  return Buffer.concat([prefix, data]);
}

const FACES = [
  {
    face: "gRPC",
    headers: {
      ":path": "/travel.auth.v2.AuthService/FetchOauth2Token",
      "content-type": "application/grpc",
      te: "trailers",
    },
    body: grpcMessage(Buffer.alloc(0)),
    /** A gRPC answer: HTTP 200 with grpc-status in the trailers (or in the headers of a trailers-only answer). */
    answered: (a: Answer) => a.status === 200 && (a.trailers["grpc-status"] ?? a.headers["grpc-status"]) !== undefined,
  },
  {
    face: "Connect",
    headers: { ":path": "/travel.auth.v2.AuthService/FetchOauth2Token", "content-type": "application/json" },
    body: Buffer.from("{}"),
    /** A Connect unary error: a 4xx whose JSON body names its Connect code. */
    answered: (a: Answer) =>
      a.status !== undefined && a.status >= 400 && a.status < 500 && typeof json(a.body)?.code === "string",
  },
  {
    face: "REST",
    headers: { ":path": "/v2/auth/oauth2-token", "content-type": "application/x-www-form-urlencoded" },
    body: Buffer.from("grant_type=client_credentials"),
    /** The token endpoint's refusal: a 4xx with the ErrorResponse (no client was named). */
    answered: (a: Answer) =>
      a.status !== undefined && a.status >= 400 && a.status < 500 && errorCodeOf(a.body) !== undefined,
  },
] as const;

function json(text: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
/** The first errorCode of an ErrorResponse body. */
function errorCodeOf(text: string): unknown {
  const messages = json(text)?.errorMessages;
  return Array.isArray(messages) ? (messages[0] as { errorCode?: unknown } | undefined)?.errorCode : undefined;
}

const data = (payload: Buffer, flags = 0) => frame(FRAME.DATA, flags, STREAM_ID, payload);
const emptyEndStream = () => data(Buffer.alloc(0), END_STREAM);

/** How the request's DATA frames are cut into TCP writes (each inner array one write). */
const SHAPES = [
  {
    shape: "DATA(body), then an empty DATA with END_STREAM, in one write",
    writes: (b: Buffer) => [[data(b), emptyEndStream()]],
  },
  {
    shape: "DATA(body) in one write, the empty DATA with END_STREAM in the next",
    writes: (b: Buffer) => [[data(b)], [emptyEndStream()]],
  },
  { shape: "no body: only an empty DATA with END_STREAM, in one write", writes: () => [[emptyEndStream()]] },
  {
    shape: "no body: an empty DATA, then an empty DATA with END_STREAM in the next write",
    writes: () => [[data(Buffer.alloc(0))], [emptyEndStream()]],
  },
] as const;

describe("an h2c request whose body ends with an empty DATA frame carrying END_STREAM is answered", () => {
  let running: RunningService;

  before(async () => {
    running = await startService({ env: ROOMY_RATE_LIMITS });
  });

  after(async () => {
    await running?.stop();
    if (running) await dropStorage(running.storage);
  });

  for (const { face, headers, body, answered } of FACES) {
    test(`${face}: answered within ${ANSWER_WITHIN_MS} ms, unauthenticated, whatever the frames' TCP writes`, async () => {
      // Compared with: the same request with END_STREAM on the body's own DATA frame.
      const plain = await rawRequest(running.baseUrl, headers, [[data(body, END_STREAM)]]);
      assert.ok(answered(plain), `the plain request's answer: ${JSON.stringify(plain)}`);
      for (const { shape, writes } of SHAPES) {
        const answer = await rawRequest(running.baseUrl, headers, writes(body));
        const seen = `${shape}: ${JSON.stringify({ ...answer, ms: Math.round(answer.ms) })}`;
        assert.ok(!answer.hung, `no answer within ${GIVE_UP_MS} ms. ${seen}`);
        assert.equal(answer.rstCode, undefined, `the server reset the stream. ${seen}`);
        assert.ok(answered(answer), `not a ${face} answer. ${seen}`);
        assert.ok(answer.ms < ANSWER_WITHIN_MS, `answered after ${Math.round(answer.ms)} ms. ${seen}`);
      }
    });
  }
});
