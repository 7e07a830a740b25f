import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, Interceptor, ServiceImpl, Transport } from "@connectrpc/connect";
import { createValidateInterceptor } from "@connectrpc/validate";
import type { Logger } from "../domain/shared/observability.js";
import type { DomainError } from "../errors/domain-error.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracer } from "@opentelemetry/api";
import type { Face } from "./area.js";
import { AREAS, areasOn, contractServices, reflectionFilesOn, type RpcDomain } from "./areas.js";
import { contractValidator } from "./contract-validator.js";
import { registerHealth, type HealthService } from "./health.js";
import { createInProcessTransport } from "./in-process-transport.js";
import { authenticationInterceptor } from "./interceptors/authentication-interceptor.js";
import { deadlineInterceptor } from "./interceptors/deadline-interceptor.js";
import { errorInterceptor } from "./interceptors/error-interceptor.js";
import { metricsInterceptor } from "./interceptors/metrics-interceptor.js";
import { principalBudgetInterceptor, type PrincipalBudget } from "./interceptors/principal-budget-interceptor.js";
import { textInterceptor } from "./interceptors/text-interceptor.js";
import { tracingInterceptor } from "./interceptors/tracing-interceptor.js";
import { registerReflection } from "./reflection.js";

/**
 * Which faces the RPCs are served on. By default one: every service on the public port. With
 * `admin`, the areas whose face is "admin" (the operator area) move to a face of their own (the admin
 * port, ADMIN_PORT): the public face then neither routes them nor lists them in reflection.
 */
export interface RpcFaces {
  /** The public face's gRPC health; given, the face serves reflection and health too. */
  readonly health?: HealthService;
  /** Serve the admin areas on the admin face only; its health, given, is served there with reflection. */
  readonly admin?: { readonly health?: HealthService };
}

type Routes = (router: ConnectRouter) => void;

export interface RpcCore {
  /** The public face: every service, or every service but the admin areas' when an admin face is configured. */
  readonly routes: Routes;
  /** The admin face (the admin areas' services, their reflection and health); undefined without one. */
  readonly adminRoutes: Routes | undefined;
  /**
   * Outermost first (tracing, when on, around everything): errors see every failure, metrics see
   * final codes; text is checked before authentication (no control byte reaches a log line or a
   * query), the principal's budget and validation after it.
   */
  readonly interceptors: Interceptor[];
  /** In-process calls to every service through the same interceptors as the network faces (the REST gateway, the CLI). */
  readonly transport: Transport;
}

/**
 * The one registration point. Methods whose issue is not done answer UNIMPLEMENTED (HTTP 501
 * through the gateway), never a made-up success.
 */
export function createRpcCore(
  domain: RpcDomain,
  observers: {
    logger: Logger;
    metrics: Metrics;
    classifyError?: (error: unknown) => DomainError | undefined;
    deadlineMs?: number;
    tracer?: Tracer;
    /** Per-principal rate and the TMC's admission on bearer-authenticated RPCs; absent: none. */
    principalBudget?: PrincipalBudget;
  },
  faces: RpcFaces = {},
): RpcCore {
  const adminFace = faces.admin !== undefined;
  const bindings = new Map(AREAS.map((area) => [area, area.bind(domain)]));
  /** A face's services, plus reflection over their files and gRPC health when the face has a health state. */
  const routesOn =
    (face: Face, health: HealthService | undefined): Routes =>
    (router) => {
      for (const area of areasOn(face, adminFace)) {
        const { service, impl } = bindings.get(area)!;
        router.service(service, impl as ServiceImpl<DescService>);
      }
      if (health) {
        registerReflection(router, reflectionFilesOn(face, adminFace));
        registerHealth(router, health);
      }
    };
  const interceptors = [
    // Only when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT): outermost, so its span holds the final outcome.
    ...(observers.tracer ? [tracingInterceptor(observers.tracer)] : []),
    errorInterceptor(observers.logger, observers.classifyError),
    metricsInterceptor(observers.metrics),
    deadlineInterceptor(observers.deadlineMs ?? 10_000),
    textInterceptor(),
    authenticationInterceptor(domain.verifiers),
    // After authentication (it budgets the principal and admits its TMC), before anything that may touch the database.
    ...(observers.principalBudget ? [principalBudgetInterceptor(observers.principalBudget)] : []),
    createValidateInterceptor({ validator: contractValidator(contractServices.map((service) => service.file)) }),
  ];
  return {
    routes: routesOn("public", faces.health),
    adminRoutes: faces.admin && routesOn("admin", faces.admin.health),
    interceptors,
    transport: createInProcessTransport([...bindings.values()], interceptors),
  };
}
