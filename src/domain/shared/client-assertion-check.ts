import type { JSONWebKeySet } from "jose";
import { DomainError } from "../../errors/domain-error.js";
import { ReplayCacheUnavailable, type ReplayCache } from "../replay/ports.js";
import type { AssertionRefusal } from "./client-assertion.js";
import { verifyWithClientKeys } from "./client-key-source.js";
import type { Clock } from "./clock.js";
import type { RemoteKeySets } from "./remote-key-sets.js";

/** What an assertion is checked against besides the client's keys (API users' and resource servers' alike). */
export interface ClientAssertionRules {
  readonly replay: ReplayCache;
  /** RFC 7523 3: the issuer, or the URL of an endpoint that takes client credentials. */
  readonly audiences: readonly string[];
  readonly clock: Clock;
  /** Sets registered by URL (jwks_uri), held per instance; without it such a client's assertions are refused. */
  readonly keySets?: Pick<RemoteKeySets, "keySetOf">;
}

/** An assertion in an authentication attempt: as presented, then (after checkClientAssertion) its verdict. */
export type AttemptAssertion = { readonly presented: string; readonly spent?: boolean } | AssertionRefusal | "verified";

/**
 * The verdict on a client's assertion: verified against its registered keys (inline, or by URL:
 * client-key-source.ts), then its jti spent in the replay cache (after the signature: nobody else
 * can spend a client's ids) — not again when `spentByThisRequest` (the one-round-trip path of
 * the same request spent it with a record found stale since). A client with no keys, or no rules
 * to check by, refuses every assertion; a cache that cannot answer is 503 DEPENDENCY_UNAVAILABLE
 * (fail closed).
 */
export async function checkClientAssertion(
  rules: ClientAssertionRules | undefined,
  client: {
    readonly clientId: string;
    readonly credentialGeneration: number;
    readonly publicKeys?: JSONWebKeySet;
    readonly jwksUri?: string;
  },
  assertion: string,
  options: { readonly spentByThisRequest?: boolean } = {},
): Promise<AssertionRefusal | "verified"> {
  if (!rules) return "assertion from a client with no registered keys";
  const { replay, audiences, clock, keySets } = rules;
  const source = { ...client, version: client.credentialGeneration };
  const verified = await verifyWithClientKeys(assertion, source, keySets, {
    clientId: client.clientId,
    audiences,
    now: clock(),
  });
  if (typeof verified === "string") return verified;
  if (options.spentByThisRequest) return "verified";
  let first: boolean;
  try {
    first = await replay.useOnce("client-assertion", `${client.clientId}:${verified.jti}`, verified.expiresAt);
  } catch (error) {
    if (!(error instanceof ReplayCacheUnavailable)) throw error;
    throw new DomainError("DEPENDENCY_UNAVAILABLE", "Client assertions cannot be checked right now", {
      cause: error,
    });
  }
  return first ? "verified" : "assertion jti already used";
}

/** A client as an assertion is checked against: its id, its generation and its keys (inline, or by URL). */
type AssertingClient = Parameters<typeof checkClientAssertion>[1];

/**
 * The attempt with its assertion's verdict in place of the assertion as presented (checkClientAssertion;
 * its jti not spent again when this request spent it already); an attempt without a client, or
 * without an assertion, as it is. Both kinds of client prove their attempts this way.
 */
export async function provedAttempt<
  A extends { readonly client?: AssertingClient; readonly assertion?: AttemptAssertion },
>(rules: ClientAssertionRules | undefined, attempt: A): Promise<A> {
  const { client, assertion } = attempt;
  if (!client || typeof assertion !== "object") return attempt;
  const spentByThisRequest = assertion.spent ?? false;
  return {
    ...attempt,
    assertion: await checkClientAssertion(rules, client, assertion.presented, { spentByThisRequest }),
  };
}

/** A proved attempt's verdict; an assertion still as presented means prove() was skipped, a wiring mistake. */
export function verdictOf(assertion: AttemptAssertion): AssertionRefusal | "verified" {
  if (typeof assertion === "object") throw new Error("a client assertion verified before prove()");
  return assertion;
}
