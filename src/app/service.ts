import type { Transport } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import type { Clock } from "../domain/shared/clock.js";
import type { SpanExporter } from "../observability/tracing.js";

export interface ServiceOptions {
  /** Where JSON logs go (stdout by default); tests capture them. */
  readonly logStream?: NodeJS.WritableStream;
  /**
   * The CLI's offline `migrate`: no migration at start (Migrate applies them), no background jobs,
   * no change feed; only what serves the Migrate call.
   */
  readonly migrateOnly?: boolean;
  /** The clock tokens are issued and verified with (tests move it). */
  readonly now?: Clock;
  /**
   * Tests only: turn tracing on and export spans here (e.g. an InMemorySpanExporter) instead of
   * OTLP. Deliberately not an environment variable, so no deployment can set it by mistake.
   */
  readonly spanExporter?: SpanExporter;
  /**
   * DATA_DIR already claimed by the caller (its release): `main` claims it before loading the
   * service's modules, so a CLI started at the same moment finds a server starting there.
   */
  readonly dataDirClaim?: () => void;
}

/** A built, migrated instance: `listen` opens the port(s), `close` drains and releases everything in order. */
export interface Service {
  readonly app: FastifyInstance;
  /** The admin listener's app (OperatorService, /metrics) when ADMIN_PORT is set. */
  readonly adminApp: FastifyInstance | undefined;
  /** In-process transport to every RPC, through the same interceptors as the network face. */
  readonly transport: Transport;
  /** What the instance runs on and where its generated secrets are kept, for the start log (never the secrets). */
  readonly about: {
    readonly database: string;
    readonly redis: string;
    readonly masterKey: string;
    readonly operatorToken: string;
  };
  /** Opens the admin port (when configured), then the public one; resolves with the public address. */
  listen(): Promise<string>;
  /** Where the admin listener listens (e.g. http://127.0.0.1:9090) once `listen` resolved; undefined without one. */
  readonly adminAddress: string | undefined;
  /**
   * The first step of a shutdown: /readyz turns 503 and gRPC health NOT_SERVING while every
   * request is still served, until `close`.
   */
  drain(): void;
  close(): Promise<void>;
}
