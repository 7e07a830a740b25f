import type { FastifyInstance } from "fastify";
import { DomainError } from "../errors/domain-error.js";
import { ErrorDialect } from "../rpc/contract.js";
import { sendError } from "./error-reply.js";
import { allowedMethods } from "./http-rules.js";
import type { DialectPathSpace } from "./path-dialects.js";

/**
 * SCIM endpoints RFC 7644 defines that this service does not offer: 501 (RFC 7644 3.12 "service
 * provider does not support the request operation"; ServiceProviderConfig says bulk.supported
 * false), where a 404 or 405 would tell an IdP the URL is wrong. Matched on the path's segments
 * after a SCIM base URL: /Bulk (3.7), /.search and /{resource}/.search (3.4.3), /Me[/…] (3.11).
 */
function unsupportedScimEndpoint(segments: readonly string[]): string | undefined {
  if (segments.length === 1 && segments[0] === "Bulk") return "Bulk operations (RFC 7644 3.7) are";
  if (segments.length <= 2 && segments.at(-1) === ".search") return "Searching with POST .search (RFC 7644 3.4.3) is";
  if (segments[0] === "Me") return "The /Me alias (RFC 7644 3.11) is";
  return undefined;
}

/** The base URLs of a space: where its fixed collections live (/v2/scim/v2/Users → /v2/scim/v2), longest first. */
function baseUrlsOf(space: DialectPathSpace): string[] {
  const fixed = space.routes.map((r) => r.route.template).filter((t) => !t.includes("{"));
  return [...new Set(fixed.map((t) => t.slice(0, t.lastIndexOf("/"))))].sort((x, y) => y.length - x.length);
}

/**
 * The not-found answer of each dialect's path space (path-dialects.ts), in that dialect: 405 with
 * Allow when the path is a route's under another method, 501 for a SCIM endpoint the service does
 * not offer, otherwise 404 (a resource type it does not serve, such as /Groups, or any other path).
 */
export function registerDialectNotFound(app: FastifyInstance, spaces: readonly DialectPathSpace[]): void {
  for (const space of spaces) {
    void app.register(
      async (scoped) => {
        const bases = baseUrlsOf(space);
        scoped.setNotFoundHandler((request, reply) => {
          const path = request.url.split("?")[0]!;
          const base = bases.find((b) => path.startsWith(`${b}/`));
          if (space.dialect === ErrorDialect.SCIM && base !== undefined) {
            const unsupported = unsupportedScimEndpoint(
              path
                .slice(base.length)
                .split("/")
                .filter((s) => s !== ""),
            );
            if (unsupported)
              return sendError(
                reply,
                new DomainError("NOT_IMPLEMENTED", `${unsupported} not supported by this service`),
                space.dialect,
              );
          }
          const allowed = allowedMethods(space.routes.filter((r) => r.matches(path)).map((r) => r.route.verb));
          if (allowed.length > 0) {
            // RFC 9110 15.5.6: a 405 names the methods the resource has.
            reply.header("allow", allowed.join(", "));
            return sendError(
              reply,
              new DomainError(
                "METHOD_NOT_ALLOWED",
                `${request.method} is not allowed on ${printablePath(path)}; allowed: ${allowed.join(", ")}`,
              ),
              space.dialect,
            );
          }
          return sendError(
            reply,
            new DomainError("ROUTE_NOT_FOUND", `No resource at ${request.method} ${printablePath(path)}`),
            space.dialect,
          );
        });
      },
      { prefix: space.prefix.slice(0, -1) },
    );
  }
}

/** The path as echoed in a message: plain URL characters only, bounded. */
function printablePath(path: string): string {
  return path.replace(/[^\w./%~:@!$&'()*+,;=-]/g, "?").slice(0, 200);
}
