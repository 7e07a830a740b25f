import type { JSONWebKeySet } from "jose";
import { verifyClientAssertion, type AssertionRefusal, type VerifiedAssertion } from "./client-assertion.js";
import type { RemoteKeySets } from "./remote-key-sets.js";

/**
 * Where a client's public keys come from: registered inline, or by URL. Any kind of client
 * (an API user, a resource server) names its keys this way; `version` is its credential
 * generation, which every registration raises, so a set held for an older registration is never
 * used on any instance once the new one is seen.
 */
export interface ClientKeySource {
  readonly clientId: string;
  readonly version: number;
  readonly publicKeys?: JSONWebKeySet;
  readonly jwksUri?: string;
}

/** The assertion's expectations besides the keys (verifyClientAssertion's). */
type Expected = Parameters<typeof verifyClientAssertion>[2];

const NO_MATCHING_KEY: AssertionRefusal = "assertion signed by no registered key";

/**
 * Verifies a client assertion against the client's keys wherever they are registered. A set
 * registered by URL is fetched as RemoteKeySets allows; an assertion naming a key the held set
 * lacks (a key rotated at the URL) refetches it once, within the per-client cooldown. No set to
 * verify with refuses, with why (fail closed).
 */
export async function verifyWithClientKeys(
  assertion: string,
  source: ClientKeySource,
  remote: Pick<RemoteKeySets, "keySetOf"> | undefined,
  expected: Expected,
): Promise<VerifiedAssertion | AssertionRefusal> {
  if (source.publicKeys) return verifyClientAssertion(assertion, source.publicKeys, expected);
  if (source.jwksUri === undefined || !remote) return "assertion from a client with no registered keys";
  const owner = { id: source.clientId, version: source.version, jwksUri: source.jwksUri };
  const held = await remote.keySetOf(owner);
  if ("unavailable" in held) return `assertion key set unavailable: jwks_uri ${held.unavailable}`;
  const verified = verifyClientAssertion(assertion, held.keys, expected);
  if (verified !== NO_MATCHING_KEY) return verified;
  const refetched = await remote.keySetOf(owner, true);
  if ("unavailable" in refetched || refetched.keys === held.keys) return verified;
  return verifyClientAssertion(assertion, refetched.keys, expected);
}
