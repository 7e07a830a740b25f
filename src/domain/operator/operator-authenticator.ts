import { unauthenticated } from "../../errors/domain-error.js";
import { tooManyRequests, type RateLimitDecision } from "../rate-limit/model.js";
import type { OperatorCredential } from "./operator-credential.js";

/** The failed-attempt budget the operator credential shares with client authentication (the rate-limit area's TokenRateLimiter). */
export interface OperatorAttemptLimiter {
  reserveAttempt(
    clientId: string,
    clientExists: boolean,
    address: string,
  ): Promise<{ decision: RateLimitDecision; evaluate: boolean; release(): Promise<void> }>;
}

/** The identity the operator's failed attempts are counted under, per source address (`--client-id operator`). */
export const OPERATOR = "operator";

/** What OperatorAuthenticator is built from. */
export interface OperatorAuthenticatorDeps {
  readonly credential: OperatorCredential;
  readonly limiter: OperatorAttemptLimiter;
}

/**
 * Authenticates the platform operator: every attempt reserves a failure point of the operator at
 * its source address first, given back on success, and wrong credentials are refused with 429 once
 * an address has spent its failure budget (the same budget as client authentication, shown and
 * lifted by `lockout show|reset --client-id operator`).
 *
 * Unlike a client's, the right operator credential is never refused, whatever has been guessed
 * (docs/operations.md, "The operator and the lockout"): it is held to at least 32 characters at
 * start, so the guess bound that a client's locked-guess budget enforces adds nothing against
 * guessing, while it let anyone at the operator's address (a NAT, a balancer) lock the operator
 * out of the one surface that lifts lockouts. Checking it costs an in-memory comparison, no
 * database read. As Hydra's admin API, the operator surface is meant to be reached over the admin
 * port, where network placement, not a lockout, keeps strangers away.
 */
export class OperatorAuthenticator {
  constructor(private readonly deps: OperatorAuthenticatorDeps) {}

  async authenticate(presented: string | undefined, address: string): Promise<void> {
    const reservation = await this.deps.limiter.reserveAttempt(OPERATOR, true, address);
    if (presented === undefined || !this.deps.credential.matches(presented)) {
      if (reservation.decision.allowed) throw unauthenticated("A valid operator credential is required");
      throw tooManyRequests(reservation.decision);
    }
    await reservation.release();
  }
}
