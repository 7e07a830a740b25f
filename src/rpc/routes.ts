import type { DescFile, DescService } from "@bufbuild/protobuf";
import { createRouterTransport, type ConnectRouter, type Interceptor, type Transport } from "@connectrpc/connect";
import { createValidateInterceptor } from "@connectrpc/validate";
import { AirCreditService, file_travel_aircredit_v3_air_credit } from "../../gen/travel/aircredit/v3/air_credit_pb.js";
import { ApiUserService, file_travel_apiuser_v2_api_user } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { AuthService, file_travel_auth_v2_auth } from "../../gen/travel/auth/v2/auth_pb.js";
import { file_travel_common_v1_error } from "../../gen/travel/common/v1/error_pb.js";
import { file_travel_operator_v1_operator, OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { file_travel_user_v2_user, UserService } from "../../gen/travel/user/v2/user_pb.js";
import type { ApiUserAdmin } from "../domain/api-users/api-user-admin.js";
import type { Logger } from "../domain/shared/observability.js";
import type { DomainError } from "../errors/domain-error.js";
import type { TokenEndpoint } from "../domain/tokens/token-endpoint.js";
import type { Metrics } from "../observability/metrics.js";
import { registerHealth, type HealthService } from "./health.js";
import { authenticationInterceptor, type Verifiers } from "./interceptors/authentication-interceptor.js";
import { deadlineInterceptor } from "./interceptors/deadline-interceptor.js";
import { errorInterceptor } from "./interceptors/error-interceptor.js";
import { metricsInterceptor } from "./interceptors/metrics-interceptor.js";
import { textInterceptor } from "./interceptors/text-interceptor.js";
import { registerReflection } from "./reflection.js";
import { ApiUserServiceHandler } from "./services/api-user-service.js";
import { AuthServiceHandler } from "./services/auth-service.js";
import { OperatorServiceHandler, type OperatorDomain } from "./services/operator-service.js";

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
  file_travel_common_v1_error,
];

/** Every service of the contract; the REST gateway exposes those whose methods have HTTP rules. */
export const contractServices: readonly DescService[] = [AuthService, ApiUserService, UserService, AirCreditService, OperatorService];

/** The domain services the RPC core translates to. */
export interface RpcDomain {
  readonly tokenEndpoint: TokenEndpoint;
  readonly apiUserAdmin: ApiUserAdmin;
  readonly operator: OperatorDomain;
  readonly verifiers: Verifiers;
}

export interface RpcCore {
  readonly routes: (router: ConnectRouter) => void;
  /**
   * Outermost first: errors see every failure, metrics see final codes; text is checked before
   * authentication (no control byte reaches a log line or a query), validation after it.
   */
  readonly interceptors: Interceptor[];
  /** In-process calls through the same interceptors as the network face (the REST gateway, the CLI). */
  readonly transport: Transport;
}

/**
 * The one registration point. Methods whose issue is not done answer UNIMPLEMENTED (HTTP 501
 * through the gateway), never a made-up success.
 */
export function createRpcCore(
  domain: RpcDomain,
  observers: { logger: Logger; metrics: Metrics; classifyError?: (error: unknown) => DomainError | undefined; deadlineMs?: number },
  health?: HealthService,
): RpcCore {
  const routes = (router: ConnectRouter) => {
    router.service(AuthService, new AuthServiceHandler(domain.tokenEndpoint));
    router.service(ApiUserService, new ApiUserServiceHandler(domain.apiUserAdmin));
    router.service(UserService, {});
    router.service(AirCreditService, {});
    router.service(OperatorService, new OperatorServiceHandler(domain.operator));
    if (health) {
      registerReflection(router, [...serviceFiles]);
      registerHealth(router, health);
    }
  };
  const interceptors = [
    errorInterceptor(observers.logger, observers.classifyError),
    metricsInterceptor(observers.metrics),
    deadlineInterceptor(observers.deadlineMs ?? 10_000),
    textInterceptor(),
    authenticationInterceptor(domain.verifiers),
    createValidateInterceptor(),
  ];
  return { routes, interceptors, transport: createRouterTransport(routes, { router: { interceptors } }) };
}
