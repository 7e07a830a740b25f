import { DomainError } from "../../errors/domain-error.js";
import type { ReplayCache } from "../replay/ports.js";
import type { Clock } from "../shared/clock.js";
// The one DPoP implementation, shared with the verifier package (CONTRIBUTING.md, "The JWS module").
import {
  BindingRefused,
  checkPresentation,
  DpopRejected,
  verifyDpopProof,
  type DpopNonces,
  type VerifiedProof,
} from "../../../packages/verifier/src/dpop-proof.js";

export {
  authorizationOf,
  DPOP_ALGORITHMS,
  DpopNonces,
  jwkThumbprint,
} from "../../../packages/verifier/src/dpop-proof.js";

/** The DPoP proof a request carried and the request it must match (RFC 9449 4.3). */
export interface DpopRequest {
  /** The DPoP header; undefined when the request has none. */
  readonly proof: string | undefined;
  /** The request as the client addressed it (RequestInfo.target); undefined when it did not come over HTTP. */
  readonly target: { readonly method: string; readonly url: string } | undefined;
}

/** The namespace of DPoP proofs in the one-time-use store. */
const REPLAY_NAMESPACE = "dpop-proof";

/**
 * DPoP (RFC 9449) at this service: the proof of a token request gives the key its token is bound
 * to; a bound token at a protected RPC needs a proof by that key for that request. Both use the
 * shared proof module (packages/verifier/src/dpop-proof.ts, as the verifier package does), the
 * nonces every instance derives from the shared key, and the one-time-use store every instance
 * shares for the proofs' `jti`.
 */
export class DpopProofs {
  constructor(
    private readonly deps: {
      readonly nonces: DpopNonces;
      /** Shared by every instance; a flushed Redis refuses what it could have seen (ReplayCache). */
      readonly replay: ReplayCache;
      readonly now: Clock;
    },
  ) {}

  /** The nonce to offer now (the DPoP-Nonce response header). */
  nonce(): string {
    return this.deps.nonces.current(this.deps.now().getTime());
  }

  /**
   * At the token endpoint: the thumbprint of the key the request's proof is signed with (its
   * token is bound to it), or undefined when the request carries no proof. A proof that fails is
   * INVALID_DPOP_PROOF or USE_DPOP_NONCE (400, RFC 9449 5 and 8).
   */
  async keyOfTokenRequest(request: DpopRequest): Promise<string | undefined> {
    if (request.proof === undefined) return undefined;
    try {
      const proof = verifyDpopProof(request.proof, this.rules(request));
      await this.useOnce(proof);
      return proof.jkt;
    } catch (error) {
      throw this.refusal(error);
    }
  }

  /**
   * At a protected RPC, once the token is verified: the verdict the verifier package gives too
   * (checkPresentation). A refusal is INVALID_DPOP_PROOF, USE_DPOP_NONCE or, for a token under the
   * wrong scheme, USER_NOT_AUTHENTICATED; the caller turns them into its 401 challenge.
   */
  async checkPresented(
    presented: { readonly scheme: "Bearer" | "DPoP"; readonly token: string },
    cnf: { readonly jkt: string } | undefined,
    request: DpopRequest,
  ): Promise<void> {
    try {
      const proof = checkPresentation(presented, cnf, request.proof, this.rules(request));
      if (proof) await this.useOnce(proof);
    } catch (error) {
      throw this.refusal(error);
    }
  }

  private rules(request: DpopRequest) {
    // Without the request's URL (an in-process call) no proof can match: refused as one that does not.
    const { method, url } = request.target ?? { method: "", url: "" };
    return { method, url, nowMs: this.deps.now().getTime(), nonces: this.deps.nonces };
  }

  private async useOnce(proof: VerifiedProof): Promise<void> {
    const fresh = await this.deps.replay.useOnce(REPLAY_NAMESPACE, proof.replayId, new Date(proof.expiresAtMs));
    if (!fresh) throw new DpopRejected("invalid_dpop_proof", "The DPoP proof was used before", "replay");
  }

  /** A refusal with its reason for the log; a nonce refusal carries the nonce to use. */
  private refusal(error: unknown): unknown {
    if (error instanceof BindingRefused)
      return new DomainError("USER_NOT_AUTHENTICATED", error.message, { logged: { refusalReason: error.check } });
    if (!(error instanceof DpopRejected)) return error;
    return new DomainError(error.error === "use_dpop_nonce" ? "USE_DPOP_NONCE" : "INVALID_DPOP_PROOF", error.message, {
      logged: { refusalReason: `dpop ${error.check}` },
      dpopNonce: this.nonce(),
    });
  }
}
