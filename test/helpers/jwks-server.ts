// A JWK Set served over http on loopback, as a client's jwks_uri: what it answers can be changed
// between requests (keys, status, headers, a delay, any body), and it counts the requests it got.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { JWK } from "jose";

/**
 * The service's JWKS settings for tests with a JWKS server: http on loopback allowed, and short
 * bounds the tests can wait out (0.5 s per fetch, a COOLDOWN_MS cooldown, sets held 1 to 3 s).
 */
export const JWKS_URI_ENV = {
  JWKS_URI_ALLOW_HTTP_LOOPBACK: "true",
  JWKS_FETCH_TIMEOUT_MS: "500",
  JWKS_COOLDOWN_MS: "1000",
  JWKS_CACHE_MIN_AGE_MS: "1000",
  JWKS_CACHE_MAX_AGE_MS: "3000",
} as const;
export const COOLDOWN_MS = 1000;

export interface JwksAnswer {
  status?: number;
  headers?: Record<string, string>;
  /** The body as is; default: {"keys": keys}. */
  body?: string;
  /** Wait this long before answering. */
  delayMs?: number;
}

export interface JwksServer {
  /** The URL of `path` (default /jwks.json) on this server. */
  readonly url: (path?: string) => string;
  /** The keys served by default. */
  keys: JWK[];
  /** What each path answers instead of the keys. */
  readonly answers: Map<string, JwksAnswer>;
  /** Requests received, by path. */
  readonly requests: (path?: string) => number;
  readonly close: () => Promise<void>;
}

export async function startJwksServer(keys: JWK[] = []): Promise<JwksServer> {
  const counts = new Map<string, number>();
  const answers = new Map<string, JwksAnswer>();
  const state = { keys };
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const answer = answers.get(path) ?? {};
    const send = () => {
      if (res.destroyed) return;
      res.writeHead(answer.status ?? 200, { "content-type": "application/json", ...answer.headers });
      res.end(answer.body ?? JSON.stringify({ keys: state.keys }));
    };
    if (answer.delayMs) setTimeout(send, answer.delayMs).unref();
    else send();
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path = "/jwks.json") => `http://127.0.0.1:${port}${path}`,
    get keys() {
      return state.keys;
    },
    set keys(next: JWK[]) {
      state.keys = next;
    },
    answers,
    requests: (path = "/jwks.json") => counts.get(path) ?? 0,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
