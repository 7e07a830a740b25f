import net from "node:net";

/** A loopback TCP proxy a test can cut and restore, to play a dependency going away. */
export interface TcpProxy {
  readonly port: number;
  /** Drops every connection and refuses new ones. */
  cut(): Promise<void>;
  /** Accepts connections again on the same port. */
  restore(): Promise<void>;
  /** Keeps every connection open but forwards nothing, in either direction (a stalled peer). */
  stall(): void;
  /** Forwards again what was held back. */
  resume(): void;
  /** Sends new connections to another port from now on (a dependency restarted elsewhere). */
  retarget(targetPort: number): void;
  /**
   * From now on, a connection whose client sends `marker` (e.g. one SQL statement's text) gets no
   * more answers from the server, while the client's side stays open: the server stalls that one
   * query. A statement is written in one chunk on loopback, so the marker is not split.
   */
  holdAnswersAfter(marker: string): void;
  /** The sockets open now, both sides of every proxied connection counted. */
  openSockets(): number;
  close(): Promise<void>;
}

/**
 * The upstream connection of a proxied `client`, both kept in `sockets` while open: either side
 * going away takes the other with it, as a real connection loss would. Piping is the caller's.
 */
export function connectUpstream(
  client: net.Socket,
  targetPort: number,
  targetHost: string,
  sockets: Set<net.Socket>,
): net.Socket {
  const upstream = net.connect(targetPort, targetHost);
  const pair = [client, upstream];
  for (const s of pair) {
    sockets.add(s);
    s.on("close", () => {
      sockets.delete(s);
      pair.forEach((peer) => peer.destroy());
    });
    s.on("error", () => s.destroy());
  }
  return upstream;
}

export async function startTcpProxy(initialTargetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  let targetPort = initialTargetPort;
  const sockets = new Set<net.Socket>();
  let stalled = false;
  let heldAfter: Buffer | undefined;
  const server = net.createServer((client) => {
    const upstream = connectUpstream(client, targetPort, targetHost, sockets);
    const pair = [client, upstream];
    client.pipe(upstream).pipe(client);
    client.on("data", (chunk: Buffer) => {
      if (heldAfter && chunk.includes(heldAfter)) {
        upstream.unpipe(client);
        upstream.pause();
      }
    });
    // After pipe(), which resumes its source: a connection opened during a stall is stalled too.
    if (stalled) pair.forEach((s) => s.pause());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  let listening = true;
  const stop = async () => {
    if (!listening) return;
    listening = false;
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    port,
    cut: stop,
    async restore() {
      if (listening) return;
      await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
      listening = true;
    },
    close: stop,
    stall() {
      stalled = true;
      for (const s of sockets) s.pause();
    },
    resume() {
      stalled = false;
      for (const s of sockets) s.resume();
    },
    retarget(port: number) {
      targetPort = port;
    },
    holdAnswersAfter(marker: string) {
      heldAfter = Buffer.from(marker);
    },
    openSockets: () => sockets.size,
  };
}

/** A proxy in front of the server a URL names (a database's, Redis's), and that URL through the proxy. */
export async function proxyInFrontOf(
  serverUrl: string,
  defaultPort: number,
): Promise<{ proxy: TcpProxy; url: string }> {
  const url = new URL(serverUrl);
  const proxy = await startTcpProxy(Number(url.port || defaultPort), url.hostname);
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  return { proxy, url: url.toString() };
}
