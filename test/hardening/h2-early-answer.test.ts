import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { dropStorage, startService, type RunningService } from "../helpers/service.js";

/**
 * An HTTP/2 call answered before its body has arrived (a message over BODY_LIMIT_BYTES) left the
 * rest of the body unread: it filled the stream's flow-control window, the client could never send
 * its END_STREAM, and the stream stayed open, counted against SETTINGS_MAX_CONCURRENT_STREAMS,
 * until the 30 s request timer. Once 100 had gathered, Node refused every new stream of that
 * session with ENHANCE_YOUR_CALM, which grpc-js reports as RESOURCE_EXHAUSTED "Bandwidth exhausted
 * or memory limit exceeded": a long-lived gRPC channel was dead for good (seen under CPU load in the
 * RPC fuzzer, where answers often left before the whole body). These calls read the answer first
 * and only then send the rest of the body, which makes that order certain. (The Connect face
 * never leaked: its refusal comes from Content-Length, before anything reads the stream; it is
 * here so that it stays so.)
 */
const BODY_LIMIT_BYTES = 65_536;
const MAX_CONCURRENT_STREAMS = 10;
const CALLS = 2 * MAX_CONCURRENT_STREAMS;
const FIRST_PART_BYTES = 32 * 1024;
const REST_BYTES = 512 * 1024;
/** Far below the request timer (30 s): a stream that has not closed by then is held open by the server. */
const CLOSE_WITHIN_MS = 5_000;

interface Call {
  readonly status?: number;
  /** The trailers, or the headers of a trailers-only answer (gRPC's refusal before any message). */
  readonly trailers: http2.IncomingHttpHeaders;
  readonly closedWithinMs?: number;
}

/**
 * Opens a stream, sends the headers and the first 32 KB of a body announced as larger than the
 * limit, waits for the whole answer (END_STREAM), then sends the other 512 KB and ends the body;
 * resolves when the stream has closed, or after CLOSE_WITHIN_MS.
 */
async function answeredBeforeTheBodyEnds(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  firstPart: Buffer,
): Promise<Call> {
  const stream = session.request({ ":method": "POST", ...headers }, { endStream: false });
  let status: number | undefined;
  let trailers: http2.IncomingHttpHeaders = {};
  stream.on("response", (h) => {
    status = Number(h[":status"]);
    if (h["grpc-status"] !== undefined) trailers = h;
  });
  stream.on("trailers", (t) => (trailers = t));
  stream.on("error", () => undefined);
  stream.resume();
  const closed = new Promise<number>((resolve) => stream.once("close", () => resolve(Date.now())));
  stream.write(firstPart);
  await new Promise<void>((resolve) => {
    stream.once("end", resolve);
    stream.once("close", resolve);
  });
  const answeredAt = Date.now();
  if (!stream.closed) stream.end(Buffer.alloc(REST_BYTES, 0x61));
  const closedAt = await Promise.race([
    closed,
    new Promise<undefined>((r) => setTimeout(() => r(undefined), CLOSE_WITHIN_MS)),
  ]);
  if (closedAt === undefined) stream.close(http2.constants.NGHTTP2_CANCEL);
  return { status, trailers, closedWithinMs: closedAt === undefined ? undefined : closedAt - answeredAt };
}

function grpcMessagePrefix(length: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

const faces = [
  {
    face: "gRPC",
    headers: {
      ":path": "/travel.auth.v2.AuthService/IntrospectToken",
      "content-type": "application/grpc",
      te: "trailers",
    },
    firstPart: Buffer.concat([grpcMessagePrefix(FIRST_PART_BYTES + REST_BYTES), Buffer.alloc(FIRST_PART_BYTES - 5)]),
    answered: (call: Call) =>
      call.status === 200 &&
      call.trailers["grpc-status"] === "3" &&
      call.trailers["grpc-message"] === "The request body is too large",
  },
  {
    face: "Connect",
    headers: {
      ":path": "/travel.auth.v2.AuthService/IntrospectToken",
      "content-type": "application/proto",
      "content-length": String(FIRST_PART_BYTES + REST_BYTES),
    },
    firstPart: Buffer.alloc(FIRST_PART_BYTES),
    answered: (call: Call) => call.status !== undefined && call.status >= 400 && call.status < 500,
  },
] as const;

describe("an HTTP/2 call answered while its body is still arriving (stream not left open)", () => {
  let running: RunningService;

  before(async () => {
    running = await startService({
      env: {
        BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES),
        HTTP2_MAX_CONCURRENT_STREAMS: String(MAX_CONCURRENT_STREAMS),
      },
    });
  });

  after(async () => {
    await running?.stop();
    if (running) await dropStorage(running.storage);
  });

  for (const { face, headers, firstPart, answered } of faces) {
    test(`${face}: ${CALLS} such calls on one session, ${MAX_CONCURRENT_STREAMS} streams allowed; each stream closes once its body is sent, and the session still serves`, async () => {
      const session = http2.connect(running.baseUrl);
      session.on("error", () => undefined);
      try {
        for (let i = 0; i < CALLS; i++) {
          const call = await answeredBeforeTheBodyEnds(session, headers, firstPart);
          assert.ok(answered(call), `call ${i + 1}: the refusal, got ${call.status} ${JSON.stringify(call.trailers)}`);
          assert.ok(
            call.closedWithinMs !== undefined,
            `call ${i + 1}: the stream was still open ${CLOSE_WITHIN_MS} ms after its answer (the server left its body unread)`,
          );
        }
        const health = session.request({ ":path": "/readyz" });
        health.resume();
        const status = await new Promise<number>((resolve, reject) => {
          health.once("response", (h) => resolve(Number(h[":status"])));
          health.once("error", reject);
        });
        assert.equal(status, 200, "a plain request on the same session afterwards");
      } finally {
        session.destroy();
      }
    });
  }
});
