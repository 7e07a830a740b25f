import type { DescFile, DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, Interceptor, Transport } from "@connectrpc/connect";
import { createValidateInterceptor } from "@connectrpc/validate";
import { AirCreditService, file_travel_aircredit_v3_air_credit } from "../../gen/travel/aircredit/v3/air_credit_pb.js";
import { ApiUserService, file_travel_apiuser_v2_api_user } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { AuthService, file_travel_auth_v2_auth } from "../../gen/travel/auth/v2/auth_pb.js";
import { file_travel_common_v1_error } from "../../gen/travel/common/v1/error_pb.js";
import { file_travel_operator_v1_operator, OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { file_travel_scim_v2_scim, ScimService } from "../../gen/travel/scim/v2/scim_pb.js";
import { file_travel_user_v2_user, UserService } from "../../gen/travel/user/v2/user_pb.js";
import type { ApiUserAdmin } from "../domain/api-users/api-user-admin.js";
import type { ScimUsers } from "../domain/scim/scim-users.js";
import type { UserProfiles } from "../domain/users/user-profiles.js";
import type { Logger } from "../domain/shared/observability.js";
import type { DomainError } from "../errors/domain-error.js";
import type { TokenEndpoint } from "../domain/tokens/token-endpoint.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracer } from "@opentelemetry/api";
import { registerHealth, type HealthService } from "./health.js";
import { createInProcessTransport } from "./in-process-transport.js";
import { authenticationInterceptor, type Verifiers } from "./interceptors/authentication-interceptor.js";
import { deadlineInterceptor } from "./interceptors/deadline-interceptor.js";
import { errorInterceptor } from "./interceptors/error-interceptor.js";
import { metricsInterceptor } from "./interceptors/metrics-interceptor.js";
import { principalBudgetInterceptor, type PrincipalBudget } from "./interceptors/principal-budget-interceptor.js";
import { textInterceptor } from "./interceptors/text-interceptor.js";
import { tracingInterceptor } from "./interceptors/tracing-interceptor.js";
import { registerReflection } from "./reflection.js";
import { AirCreditServiceHandler, type AirCreditDomain } from "./services/air-credit-service.js";
import { ApiUserServiceHandler } from "./services/api-user-service.js";
import { AuthServiceHandler } from "./services/auth-service.js";
import { OperatorServiceHandler, type OperatorDomain } from "./services/operator-service.js";
import { ScimServiceHandler } from "./services/scim-service.js";
import { UserServiceHandler } from "./services/user-service.js";

/**
 * The files reflection serves: every service, and the ErrorResponse detail so tools such as
 * `buf curl` can show error details instead of base64.
 */
export const serviceFiles: readonly DescFile[] = [
  file_travel_auth_v2_auth,
  file_travel_apiuser_v2_api_user,
  file_travel_user_v2_user,
  file_travel_aircredit_v3_air_credit,
  file_travel_operator_v1_operator,
  file_travel_scim_v2_scim,
  file_travel_common_v1_error,
];

/** Every service of the contract; the REST gateway exposes those whose methods have HTTP rules. */
export const contractServices: readonly DescService[] = [
  AuthService,
  ApiUserService,
  UserService,
  AirCreditService,
  OperatorService,
  ScimService,
];

/** The domain services the RPC core translates to. */
export interface RpcDomain {
  readonly tokenEndpoint: TokenEndpoint;
  readonly apiUserAdmin: ApiUserAdmin;
  readonly scimUsers: ScimUsers;
  readonly userProfiles: UserProfiles;
  readonly airCredits: AirCreditDomain;
  readonly operator: OperatorDomain;
  readonly verifiers: Verifiers;
}

/**
 * Which faces the RPCs are served on. By default one: every service on the public port. With
 * `admin`, OperatorService moves to a face of its own (the admin port, ADMIN_PORT): the public
 * face then neither routes it nor lists it in reflection.
 */
export interface RpcFaces {
  /** The public face's gRPC health; given, the face serves reflection and health too. */
  readonly health?: HealthService;
  /** Serve OperatorService on the admin face only; its health, given, is served there with reflection. */
  readonly admin?: { readonly health?: HealthService };
}

type Routes = (router: ConnectRouter) => void;

export interface RpcCore {
  /** The public face: every service, or every service but OperatorService when an admin face is configured. */
  readonly routes: Routes;
  /** The admin face (OperatorService, its reflection and health); undefined without one. */
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
    /** Per-principal concurrency and rate on bearer-authenticated RPCs; absent: none. */
    principalBudget?: Omit<PrincipalBudget, "maxQueueWaitMs">;
  },
  faces: RpcFaces = {},
): RpcCore {
  const auth = new AuthServiceHandler(domain.tokenEndpoint);
  const apiUsers = new ApiUserServiceHandler(domain.apiUserAdmin);
  const users = new UserServiceHandler(domain.userProfiles);
  const operator = new OperatorServiceHandler(domain.operator);
  const airCredits = new AirCreditServiceHandler(domain.airCredits);
  const scim = new ScimServiceHandler(domain.scimUsers);
  const publicServices = (router: ConnectRouter) => {
    router.service(AuthService, auth);
    router.service(ApiUserService, apiUsers);
    router.service(UserService, users);
    router.service(AirCreditService, airCredits);
    router.service(ScimService, scim);
  };
  const operatorService = (router: ConnectRouter) => router.service(OperatorService, operator);
  const everything = withInfrastructure(
    (router) => {
      publicServices(router);
      operatorService(router);
    },
    serviceFiles,
    faces.health,
  );
  const interceptors = [
    // Only when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT): outermost, so its span holds the final outcome.
    ...(observers.tracer ? [tracingInterceptor(observers.tracer)] : []),
    errorInterceptor(observers.logger, observers.classifyError),
    metricsInterceptor(observers.metrics),
    deadlineInterceptor(observers.deadlineMs ?? 10_000),
    textInterceptor(),
    authenticationInterceptor(domain.verifiers),
    // After authentication (it budgets the principal), before anything that may touch the database.
    // A queued call gives up at half the deadline: the caller gets 429 with Retry-After, not a 504.
    ...(observers.principalBudget
      ? [
          principalBudgetInterceptor({
            ...observers.principalBudget,
            maxQueueWaitMs: (observers.deadlineMs ?? 10_000) / 2,
          }),
        ]
      : []),
    createValidateInterceptor(),
  ];
  return {
    routes: faces.admin
      ? withInfrastructure(
          publicServices,
          serviceFiles.filter((f) => f !== file_travel_operator_v1_operator),
          faces.health,
        )
      : everything,
    adminRoutes:
      faces.admin &&
      withInfrastructure(
        operatorService,
        [file_travel_operator_v1_operator, file_travel_common_v1_error],
        faces.admin.health,
      ),
    interceptors,
    transport: createInProcessTransport(
      [
        { service: AuthService, impl: auth },
        { service: ApiUserService, impl: apiUsers },
        { service: UserService, impl: users },
        { service: AirCreditService, impl: airCredits },
        { service: OperatorService, impl: operator },
        { service: ScimService, impl: scim },
      ],
      interceptors,
    ),
  };
}

/** A face's services, plus reflection over `files` and gRPC health when the face has a health state. */
function withInfrastructure(services: Routes, files: readonly DescFile[], health: HealthService | undefined): Routes {
  return (router) => {
    services(router);
    if (health) {
      registerReflection(router, [...files]);
      registerHealth(router, health);
    }
  };
}
