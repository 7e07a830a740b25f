// gRPC health checking (grpc.health.v1.Health) for a Connect router.
//
// No npm package provides this for connect-node (grpc-health-check only plugs
// into @grpc/grpc-js servers), so it is implemented here following
// https://github.com/grpc/grpc/blob/master/doc/health-checking.md.
// Every registered service shares the overall status reported by `check()`.
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";

export { ServingStatus };

export interface HealthServiceOptions {
  /** Fully-qualified service names to report on (e.g. "travel.apiuser.v2.ApiUserService"). */
  services?: readonly string[];
  /** How often Watch re-evaluates `check()`, in milliseconds. Default 5000. */
  pollIntervalMs?: number;
}

export interface HealthService {
  /** "" (overall server health) followed by the configured service names. */
  readonly services: readonly string[];
  readonly pollIntervalMs: number;
  /** Current status; SERVICE_UNKNOWN for names that are not registered. */
  status(service: string): Promise<ServingStatus>;
  /** Current status of "" and every registered service (one `check()` call). */
  statuses(): Promise<Record<string, ServingStatus>>;
  /** Reports NOT_SERVING from now on, e.g. while draining before shutdown. */
  shutdown(): void;
}

/**
 * Creates the health state. `check()` decides overall health; a rejection
 * counts as NOT_SERVING.
 */
export function createHealthService(check: () => Promise<boolean>, options: HealthServiceOptions = {}): HealthService {
  const services = [...new Set(["", ...(options.services ?? [])])];
  const known = new Set(services);
  let shuttingDown = false;
  const overall = async (): Promise<ServingStatus> => {
    if (shuttingDown) return ServingStatus.NOT_SERVING;
    const ok = await check().catch(() => false);
    return ok && !shuttingDown ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  };
  return {
    services,
    pollIntervalMs: options.pollIntervalMs ?? 5000,
    async status(service) {
      return known.has(service) ? overall() : ServingStatus.SERVICE_UNKNOWN;
    },
    async statuses() {
      const status = await overall();
      return Object.fromEntries(services.map((s) => [s, status]));
    },
    shutdown() {
      shuttingDown = true;
    },
  };
}

/** Registers grpc.health.v1.Health (Check, Watch, List) on the router. */
export function registerHealth(router: ConnectRouter, health: HealthService): void {
  router.service(Health, {
    async check(req) {
      const status = await health.status(req.service);
      if (status === ServingStatus.SERVICE_UNKNOWN) {
        throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
      }
      return { status };
    },
    // Sends the current status immediately, then on every change; an unknown
    // service yields SERVICE_UNKNOWN without ending the call (per the spec).
    async *watch(req, ctx) {
      let last: ServingStatus | undefined;
      while (!ctx.signal.aborted) {
        const status = await health.status(req.service);
        if (status !== last) {
          last = status;
          yield { status };
        }
        try {
          await sleep(health.pollIntervalMs, undefined, { signal: ctx.signal });
        } catch {
          return; // client went away (or the server is shutting down)
        }
      }
    },
    async list() {
      const statuses = await health.statuses();
      return {
        statuses: Object.fromEntries(Object.entries(statuses).map(([name, status]) => [name, { status }])),
      };
    },
  });
}
