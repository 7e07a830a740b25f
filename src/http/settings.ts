import type { DualProtocolOptions } from "./protocol/dual-protocol-server.js";

/**
 * The HTTP settings (HOST, PORT, ADMIN_*, HTTP_*, HTTP2_*, BODY_LIMIT_BYTES, TRUSTED_PROXIES and
 * the shutdown, readiness and deadline timeouts: src/config/config.ts reads them), taken whole by
 * the public and admin faces. The server's own timeouts and HTTP/2 limits are DualProtocolOptions.
 */
export interface HttpConfig extends DualProtocolOptions {
  readonly host: string;
  readonly port: number;
  /**
   * A second listener for the operator surface (OperatorService, its reflection, /metrics);
   * when set, the public port no longer serves them. Undefined: everything on the one port.
   */
  readonly admin: AdminListenerConfig | undefined;
  readonly bodyLimitBytes: number;
  /** Longer request URLs get 414. */
  readonly maxUrlBytes: number;
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDRs); empty: none. */
  readonly trustedProxies: readonly string[];
  /** The readiness check gives up on a dependency after this (Postgres "down", Redis "degraded"). */
  readonly readinessTimeoutMs: number;
  /**
   * How often a background check refreshes the readiness state that /readyz and gRPC health
   * answer from (at once, whatever the machine's load).
   */
  readonly readinessIntervalMs: number;
  /** Every RPC but the operator's answers within this (504 DEADLINE_EXCEEDED otherwise). */
  readonly requestDeadlineMs: number;
  /**
   * After SIGTERM, how long the instance says not ready (/readyz 503, gRPC health NOT_SERVING)
   * while still serving, so a load balancer's health checks take it out before it closes.
   */
  readonly shutdownDrainMs: number;
  /** After this long past SIGTERM the process exits with code 1 whatever is still running. */
  readonly shutdownDeadlineMs: number;
}

export interface AdminListenerConfig {
  readonly host: string;
  readonly port: number;
}
