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

/** The identity the operator's failed attempts are counted under, per source address. */
const OPERATOR = "operator";

/**
 * Authenticates the platform operator: every attempt reserves a failure point of the operator at
 * its source address first (the same budget rules as client authentication), given back on
 * success, so the operator credential cannot be guessed at speed. As for clients, a spent budget
 * refuses wrong credentials, not the right one, while the locked-guess budget lasts.
 */
export class OperatorAuthenticator {
  constructor(
    private readonly credential: OperatorCredential,
    private readonly limiter: OperatorAttemptLimiter,
  ) {}

  async authenticate(presented: string | undefined, address: string): Promise<void> {
    const reservation = await this.limiter.reserveAttempt(OPERATOR, true, address);
    const limited = () => tooManyRequests(reservation.decision.retryAfterSeconds ?? 1);
    if (!reservation.evaluate) throw limited();
    if (presented === undefined || !this.credential.matches(presented)) {
      throw reservation.decision.allowed ? unauthenticated("A valid operator credential is required") : limited();
    }
    await reservation.release();
  }
}
