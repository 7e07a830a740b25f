// Small HTTP/1.1 client for the bench's own requests (setup, checks, the invalidation probe):
// node:http over one keep-alive agent, so a probe loop reuses its connections and measures the
// server rather than connection setup.
import http from "node:http";

export const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

export interface HttpAnswer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  json<T = Record<string, unknown>>(): T;
}

export function request(
  url: string,
  options: { method?: "GET" | "POST"; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined ? undefined : Buffer.from(options.body);
    const req = http.request(
      url,
      {
        method: options.method ?? (body ? "POST" : "GET"),
        agent,
        headers: { ...(body ? { "content-length": String(body.length) } : {}), ...options.headers },
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            json<T>() {
              return JSON.parse(text) as T;
            },
          });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`timeout after ${options.timeoutMs ?? 10_000} ms: ${url}`)));
    req.on("error", reject);
    req.end(body);
  });
}

export const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
export const FORM = { "content-type": "application/x-www-form-urlencoded" };
export const JSON_TYPE = { "content-type": "application/json" };
