import type { IncomingMessage } from "node:http";
import proxyAddr from "@fastify/proxy-addr";

/**
 * Which hops' X-Forwarded-For is believed: the proxies of TRUSTED_PROXIES (addresses or CIDR
 * ranges) compiled once; false when there are none, and then the socket's address is the caller's.
 */
export type ProxyTrust = ((address: string, hop: number) => boolean) | false;

/**
 * The one client-address rule of every face. Fastify is given this function as its `trustProxy`
 * (fastify-app.ts), so its `request.ip` (REST, Connect, gRPC-Web, and the address every access-log
 * line and rate limit reads) applies it; the lean gRPC path, which answers before Fastify sees
 * the stream, applies it through clientAddressOf.
 */
export function proxyTrustOf(trustedProxies: readonly string[]): ProxyTrust {
  return trustedProxies.length > 0 ? proxyAddr.compile([...trustedProxies]) : false;
}

/** The caller's address as Fastify's request.ip gives it: the socket's, or X-Forwarded-For's nearest untrusted hop. */
export function clientAddressOf(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  trust: ProxyTrust,
): string {
  if (!trust || socketAddress === undefined) return socketAddress ?? "unknown";
  const request = { socket: { remoteAddress: socketAddress }, headers: { "x-forwarded-for": forwardedFor } };
  return proxyAddr(request as unknown as IncomingMessage, trust);
}

/**
 * The URL the client addressed (a DPoP proof's `htu`), by Fastify's rule for request.protocol
 * and request.host, so the lean gRPC path agrees with every other face: X-Forwarded-Proto and
 * X-Forwarded-Host (their last entries) when the socket's peer is a trusted proxy, else the
 * connection's own scheme and the Host or :authority header.
 */
export function addressedUrlOf(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  path: string,
  connection: { readonly encrypted: boolean; readonly remoteAddress: string | undefined },
  trust: ProxyTrust,
): string {
  const trusted = trust !== false && connection.remoteAddress !== undefined && trust(connection.remoteAddress, 0);
  const forwarded = (name: string) => (trusted ? lastEntry(headers[name]) : undefined);
  const protocol = forwarded("x-forwarded-proto") ?? (connection.encrypted ? "https" : "http");
  const host = forwarded("x-forwarded-host") ?? lastEntry(headers.host) ?? lastEntry(headers[":authority"]) ?? "";
  return `${protocol}://${host}${path}`;
}

function lastEntry(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value.at(-1) : value;
  if (text === undefined || text === "") return undefined;
  return text.slice(text.lastIndexOf(",") + 1).trim();
}
