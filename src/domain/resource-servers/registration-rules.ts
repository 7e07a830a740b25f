import { invalidArgument, type ErrorParameter } from "../../errors/domain-error.js";
import { holdsForbiddenText } from "../shared/text.js";
import { AUDIENCE_MAX_LENGTH, MAX_AUDIENCES_PER_RESOURCE_SERVER, RESOURCE_SERVER_NAME_MAX_LENGTH } from "./model.js";

/**
 * RFC 3986 absolute-URI (scheme ":" hier-part [ "?" query ]) in its own characters: a scheme, then
 * only unreserved, reserved (but '#') and percent-encoded octets. No fragment: RFC 8707 2 says a
 * resource indicator must not have one, and an `aud` is compared as the exact string.
 */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$/;

/**
 * The rules of a registration, all checked before anything is written, every broken one named
 * in one 400 (as the contract's rules are): a name of 1 to 200 characters in the text rule; 1 to
 * 20 distinct audiences, each an absolute URI without fragment of at most 512 characters, and
 * none the service's own audience (tokens for it are this service's own, not a resource server's).
 */
export function checkRegistration(name: string, audiences: readonly string[], ownAudience: string): void {
  const problems: ErrorParameter[] = [];
  const nameLength = [...name].length;
  if (nameLength < 1 || nameLength > RESOURCE_SERVER_NAME_MAX_LENGTH)
    problems.push({ name: "name", value: `must be 1 to ${RESOURCE_SERVER_NAME_MAX_LENGTH} characters` });
  else if (holdsForbiddenText(name)) problems.push({ name: "name", value: "invalid characters" });
  if (audiences.length < 1 || audiences.length > MAX_AUDIENCES_PER_RESOURCE_SERVER)
    problems.push({ name: "audiences", value: `must hold 1 to ${MAX_AUDIENCES_PER_RESOURCE_SERVER} audiences` });
  const seen = new Set<string>();
  audiences.forEach((audience, index) => {
    const problem = audienceProblem(audience, ownAudience, seen);
    if (problem) problems.push({ name: `audiences[${index}]`, value: problem });
    seen.add(audience);
  });
  if (problems.length > 0) throw invalidArgument("The request is invalid", problems);
}

function audienceProblem(audience: string, ownAudience: string, seen: ReadonlySet<string>): string | undefined {
  if (audience.length > AUDIENCE_MAX_LENGTH) return `must be at most ${AUDIENCE_MAX_LENGTH} characters`;
  if (!ABSOLUTE_URI.test(audience)) return "must be an absolute URI without a fragment";
  if (audience === ownAudience) return "is this service's own audience (TOKEN_AUDIENCE)";
  if (seen.has(audience)) return "is named twice";
  return undefined;
}
