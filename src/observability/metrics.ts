import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** Prometheus metrics of one service instance (its own registry, so tests can run several). */
export interface Metrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<"method" | "route" | "status">;
  readonly httpDuration: Histogram<"method" | "route">;
  readonly rpcRequests: Counter<"service" | "method" | "code">;
  readonly rpcDuration: Histogram<"service" | "method">;
  /** Credential-state reads or writes that Redis could not serve (Postgres answered instead). */
  readonly redisFallbacks: Counter<"operation">;
  /** Rate-limiter calls served by the per-instance in-memory limiter because Redis failed. */
  readonly rateLimiterFallbacks: Counter;
  /** Token-endpoint admissions by path: one Redis round trip for a client record held in process, or step by step. */
  readonly tokenAdmissions: Counter<"path">;
  /** Tokens introspected by resource servers, per resource server and answer. */
  readonly resourceServerIntrospections: Counter<"resource_server" | "active">;
  /** Credential-change streams open on this instance, and the events they sent by kind. */
  readonly changeStreamsOpen: Gauge;
  readonly changeStreamEvents: Counter<"kind">;
  /**
   * Events written by the audit batch, per tenant ("" for the platform's own and unknown
   * clients'). One series per tenant: tmc_id comes from the client record, never from a request,
   * so the label has as many values as there are tenants (1,000 tenants: 1,000 series an instance).
   */
  readonly auditWritten: Counter<"tmc_id">;
  readonly auditWriteFailures: Counter;
  readonly auditDropped: Counter;
  readonly auditRejected: Counter;
  /** Months after the current one whose audit partition exists, as the partition job last saw them (it keeps 3). */
  readonly auditPartitionsAhead: Gauge;
  /** Unix time of the partition job's last run that acted (created ahead and applied retention). */
  readonly auditPartitionMaintained: Gauge;
  /** 1 while the Redis circuit breaker is open (the instance is degraded, serving through its fallbacks). */
  readonly redisBreakerOpen: Gauge;
  /** 1 for the status each readiness dependency is in ("up", "degraded", "down"), 0 for the others; read at each scrape. */
  readonly readinessStatus: Gauge<"dependency" | "status">;
  /** Gives readinessStatus the readiness check it reads (the composition root's, shared with /readyz). */
  observeReadiness(checks: () => Promise<Record<string, DependencyStatus>>): void;
  /** The admission's adaptive limit, and its calls running and waiting (admission.ts); read at each scrape. */
  readonly admissionLimit: Gauge;
  readonly admissionCalls: Gauge<"state">;
  /** Gives the admission gauges the state they read (the instance's FairAdmission). */
  observeAdmission(state: () => AdmissionFigures): void;
}

/** What the admission gauges read: the adaptive limit, and the calls running and waiting. */
export interface AdmissionFigures {
  readonly limit: number;
  readonly running: number;
  readonly waiting: number;
}

/** The statuses readiness (src/app/readiness.ts) gives a dependency: written here, where the gauge lists them all. */
export const DEPENDENCY_STATUSES = ["up", "degraded", "down"] as const;
export type DependencyStatus = (typeof DEPENDENCY_STATUSES)[number];

/** prom-client's default gauges whose names end in `_total` (sum(nodejs_active_handles) gives the first). */
const NON_COUNTER_TOTALS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // prom-client also exports these three totals as gauges named `_total`, which the exposition
  // format reserves for counters (`promtool check metrics` fails on them). The same figures are
  // the sum of the labelled gauges it keeps (nodejs_active_handles{type}, …).
  for (const name of NON_COUNTER_TOTALS) registry.removeSingleMetric(name);
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
  let readiness: (() => Promise<Record<string, DependencyStatus>>) | undefined;
  let admission: (() => AdmissionFigures) | undefined;
  return {
    registry,
    httpRequests: new Counter({
      name: "http_requests_total",
      help: "HTTP requests by method, route template and status code",
      labelNames: ["method", "route", "status"],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "http_request_duration_seconds",
      help: "HTTP request latency by method and route template",
      labelNames: ["method", "route"],
      buckets,
      registers: [registry],
    }),
    rpcRequests: new Counter({
      name: "rpc_requests_total",
      help: "RPCs (from any protocol or the REST gateway) by service, method and Connect code",
      labelNames: ["service", "method", "code"],
      registers: [registry],
    }),
    rpcDuration: new Histogram({
      name: "rpc_duration_seconds",
      help: "RPC latency by service and method",
      labelNames: ["service", "method"],
      buckets,
      registers: [registry],
    }),
    redisFallbacks: new Counter({
      name: "credential_state_redis_fallbacks_total",
      help: "Credential-generation checks or updates that fell back to Postgres because Redis failed",
      labelNames: ["operation"],
      registers: [registry],
    }),
    rateLimiterFallbacks: new Counter({
      name: "rate_limiter_fallbacks_total",
      help: "Rate-limit decisions made by the in-memory insurance limiter because Redis failed",
      registers: [registry],
    }),
    tokenAdmissions: new Counter({
      name: "token_admissions_total",
      help: "Token-endpoint requests admitted or refused in one Redis round trip (one_round_trip) or step by step (step_by_step)",
      labelNames: ["path"],
      registers: [registry],
    }),
    resourceServerIntrospections: new Counter({
      name: "resource_server_introspections_total",
      help: "Tokens introspected by each resource server (its client id), by answer (active true or false)",
      labelNames: ["resource_server", "active"],
      registers: [registry],
    }),
    changeStreamsOpen: new Gauge({
      name: "credential_change_streams_open",
      help: "Credential-change streams (WatchCredentialChanges) open on this instance",
      registers: [registry],
    }),
    changeStreamEvents: new Counter({
      name: "credential_change_stream_events_total",
      help: "Events sent on credential-change streams, by kind (snapshot, credential_changed, token_revoked, signing_keys_changed, heartbeat)",
      labelNames: ["kind"],
      registers: [registry],
    }),
    auditWritten: new Counter({
      name: "audit_events_written_total",
      help: "Audit events written in batches, by tenant (tmc_id; empty for the platform's own events)",
      labelNames: ["tmc_id"],
      registers: [registry],
    }),
    auditWriteFailures: new Counter({
      name: "audit_write_failures_total",
      help: "Failed audit batch writes (retried)",
      registers: [registry],
    }),
    auditDropped: new Counter({
      name: "audit_events_dropped_total",
      help: "Audit events lost: buffer overflow or shutdown with the database down",
      registers: [registry],
    }),
    auditPartitionsAhead: new Gauge({
      name: "audit_partitions_months_ahead",
      help: "Months after the current one with an audit partition created (the partition job keeps 3)",
      registers: [registry],
    }),
    auditPartitionMaintained: new Gauge({
      name: "audit_partition_maintenance_last_success_timestamp_seconds",
      help: "Unix time of the audit partition job's last successful run on this instance (partitions ahead and retention)",
      registers: [registry],
    }),
    redisBreakerOpen: new Gauge({
      name: "redis_circuit_breaker_open",
      help: "1 while the Redis circuit breaker is open",
      registers: [registry],
    }),
    auditRejected: new Counter({
      name: "audit_events_rejected_total",
      help: "Audit events the database refused outright, set aside so the trail goes on",
      registers: [registry],
    }),
    readinessStatus: new Gauge({
      name: "readiness_dependency_status",
      help: "1 for the status (up, degraded, down) each dependency of /readyz is in, 0 for the others",
      labelNames: ["dependency", "status"],
      registers: [registry],
      // At each scrape, from the state /readyz answers from (refreshed every READINESS_INTERVAL_MS):
      // the alert must see a degraded instance that no balancer probes.
      async collect() {
        if (!readiness) return;
        for (const [dependency, current] of Object.entries(await readiness()))
          for (const status of DEPENDENCY_STATUSES) this.set({ dependency, status }, status === current ? 1 : 0);
      },
    }),
    observeReadiness(checks) {
      readiness = checks;
    },
    admissionLimit: new Gauge({
      name: "admission_concurrency_limit",
      help: "The adaptive limit of calls that take a database connection running at once on this instance",
      registers: [registry],
      collect() {
        if (admission) this.set(admission().limit);
      },
    }),
    admissionCalls: new Gauge({
      name: "admission_calls",
      help: "Calls that take a database connection on this instance: running, or waiting in memory for their party's slot",
      labelNames: ["state"],
      registers: [registry],
      collect() {
        if (!admission) return;
        const { running, waiting } = admission();
        this.set({ state: "running" }, running);
        this.set({ state: "waiting" }, waiting);
      },
    }),
    observeAdmission(state) {
      admission = state;
    },
  };
}
