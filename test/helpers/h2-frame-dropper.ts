import net from "node:net";
import { connectUpstream } from "./tcp-proxy.js";

/**
 * A loopback TCP proxy for h2c that loses one message while the link stays up: it reads the
 * server's bytes as HTTP/2 frames and, when asked, silently discards the next DATA frame whose
 * payload contains a marker, forwarding everything else as it came. That is what a byte-dropping
 * middlebox can do to HTTP/2 without breaking it: DATA frames carry no compression state (HPACK
 * lives in HEADERS), so the connection, its pings and the stream's later messages go on; dropping
 * arbitrary bytes instead would desynchronise the framing and end the connection, which a receiver
 * notices anyway.
 */
export interface FrameDropper {
  readonly port: number;
  /** Discards the next server DATA frame containing `marker`; resolves with that frame's payload once it has. */
  dropNextDataFrameContaining(marker: Buffer): Promise<Buffer>;
  /** How many frames it has discarded. */
  readonly dropped: number;
  close(): Promise<void>;
}

const FRAME_HEADER = 9;
const DATA = 0x0;

export async function startFrameDropper(targetPort: number, targetHost = "127.0.0.1"): Promise<FrameDropper> {
  const sockets = new Set<net.Socket>();
  let pending: { marker: Buffer; resolve: (payload: Buffer) => void } | undefined;
  let dropped = 0;
  /** Whether to forward this whole frame (false: it was the one asked for, now discarded). */
  const keep = (frame: Buffer): boolean => {
    if (!pending || frame[3] !== DATA) return true;
    const payload = frame.subarray(FRAME_HEADER);
    if (!payload.includes(pending.marker)) return true;
    const { resolve } = pending;
    pending = undefined;
    dropped++;
    resolve(Buffer.from(payload));
    return false;
  };
  const server = net.createServer((client) => {
    const upstream = connectUpstream(client, targetPort, targetHost, sockets);
    client.pipe(upstream);
    // HTTP/2 when the client opens with the preface (else HTTP/1.1, the JWKS fetch: passed as is).
    let h2: boolean | undefined;
    client.once("data", (chunk: Buffer) => (h2 = chunk.subarray(0, 4).toString("latin1") === "PRI "));
    // The server's side, frame by frame (it sends no preface of its own: frames from its first byte).
    let buffered = Buffer.alloc(0);
    upstream.on("data", (chunk: Buffer) => {
      if (h2 === false) return void client.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      const out: Buffer[] = [];
      while (buffered.length >= FRAME_HEADER) {
        const size = FRAME_HEADER + buffered.readUIntBE(0, 3);
        if (buffered.length < size) break;
        const frame = buffered.subarray(0, size);
        buffered = buffered.subarray(size);
        if (keep(frame)) out.push(frame);
      }
      if (out.length > 0) client.write(Buffer.concat(out));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    dropNextDataFrameContaining(marker) {
      return new Promise((resolve) => (pending = { marker, resolve }));
    },
    get dropped() {
      return dropped;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
