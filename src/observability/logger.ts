import type { FastifyServerOptions } from "fastify";

/** Paths pino replaces with "[REDACTED]": credentials never reach the log, whatever logs them. */
export const REDACTED_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "headers.authorization",
  "*.client_secret",
  "*.clientSecret",
  "*.scimToken",
  "*.scim_token",
  "*.access_token",
  "*.refresh_token",
  "*.subject_token",
  "*.token",
  "*.password",
];

/** JSON logs through Fastify's pino; request URLs are logged without their query string values. */
export function loggerOptions(level: string, stream?: NodeJS.WritableStream): FastifyServerOptions["logger"] {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: "[REDACTED]" },
    serializers: {
      req(request: { method: string; url: string; ip?: string; id?: string }) {
        const [path, query] = request.url.split("?", 2);
        return {
          method: request.method,
          url: query === undefined ? path : `${path}?${[...new URLSearchParams(query).keys()].map((k) => `${k}=…`).join("&")}`,
          remoteAddress: request.ip,
        };
      },
    },
    ...(stream ? { stream } : {}),
  } as FastifyServerOptions["logger"];
}
