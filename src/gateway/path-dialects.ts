import { ErrorDialect } from "../rpc/contract.js";
import type { RestRoute } from "./http-rules.js";

/** A path space owned by one error dialect: every REST path under `prefix` speaks it. */
export interface DialectPathSpace {
  readonly dialect: ErrorDialect;
  /** Ends with "/", e.g. "/v2/scim/". */
  readonly prefix: string;
  /** The dialect's routes, each with a matcher for concrete paths. */
  readonly routes: ReadonlyArray<{ readonly route: RestRoute; readonly matches: (path: string) => boolean }>;
}

/**
 * The path spaces the contract gives a dialect of its own: the directory all of a dialect's routes
 * share (SCIM's /v2/scim/), when no route of another dialect lies under it (the OAuth routes share
 * only "/", so they own none). Answers on such a path that no route produced (404, 405, 501, a
 * refusal before routing) speak the dialect too: an IdP parses every SCIM answer as a SCIM error
 * (RFC 7644 3.12), whatever refused it.
 */
export function dialectPathSpaces(routes: readonly RestRoute[]): DialectPathSpace[] {
  const spaces: DialectPathSpace[] = [];
  const dialects = new Set(routes.map((r) => r.dialect).filter((d) => d !== ErrorDialect.ERROR_DIALECT_UNSPECIFIED));
  for (const dialect of dialects) {
    const own = routes.filter((r) => r.dialect === dialect);
    const prefix = commonDirectory(own.map((r) => r.template));
    if (prefix === "/" || routes.some((r) => r.dialect !== dialect && r.template.startsWith(prefix))) continue;
    spaces.push({ dialect, prefix, routes: own.map((route) => ({ route, matches: matcherOf(route.template) })) });
  }
  return spaces;
}

/** The path space a request path (query included or not) lies in, if any. */
export function pathSpaceOf(spaces: readonly DialectPathSpace[], url: string): DialectPathSpace | undefined {
  const path = url.split("?")[0]!;
  return spaces.find((s) => path.startsWith(s.prefix) || path === s.prefix.slice(0, -1));
}

function commonDirectory(templates: readonly string[]): string {
  let prefix = templates[0] ?? "/";
  for (const t of templates) while (!t.startsWith(prefix)) prefix = prefix.slice(0, -1);
  return prefix.slice(0, prefix.lastIndexOf("/") + 1) || "/";
}

/** A template's path (variables match one non-empty segment), with or without a trailing slash. */
function matcherOf(template: string): (path: string) => boolean {
  const pattern = template
    .split(/\{[a-z_][a-z0-9_]*\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^/]+");
  const regex = new RegExp(`^${pattern}/?$`);
  return (path) => regex.test(path);
}
