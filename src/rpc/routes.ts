import type { DescFile } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { AirCreditService, file_travel_aircredit_v3_air_credit } from "../../gen/travel/aircredit/v3/air_credit_pb.js";
import { ApiUserService, file_travel_apiuser_v2_api_user } from "../../gen/travel/apiuser/v2/api_user_pb.js";
import { AuthService, file_travel_auth_v2_auth } from "../../gen/travel/auth/v2/auth_pb.js";
import { file_travel_operator_v1_operator, OperatorService } from "../../gen/travel/operator/v1/operator_pb.js";
import { file_travel_user_v2_user, UserService } from "../../gen/travel/user/v2/user_pb.js";
import { registerHealth, type HealthService } from "./health.js";
import { registerReflection } from "./reflection.js";

/** The service files the process serves; reflection, OpenAPI and the gateway derive from these. */
export const serviceFiles: readonly DescFile[] = [
  file_travel_auth_v2_auth,
  file_travel_apiuser_v2_api_user,
  file_travel_user_v2_user,
  file_travel_aircredit_v3_air_credit,
  file_travel_operator_v1_operator,
];

/** The services whose RPCs the REST gateway exposes (the operator's are RPC-only). */
export const publicServices = [AuthService, ApiUserService, UserService, AirCreditService] as const;

export interface ServiceHandlers {
  auth: Partial<ServiceImpl<typeof AuthService>>;
  apiUsers: Partial<ServiceImpl<typeof ApiUserService>>;
  users: Partial<ServiceImpl<typeof UserService>>;
  airCredits: Partial<ServiceImpl<typeof AirCreditService>>;
  operator: ServiceImpl<typeof OperatorService>;
}

/**
 * The one registration point. Methods a handler does not implement yet answer UNIMPLEMENTED
 * (HTTP 501 through the gateway), never a made-up success.
 */
export function createRoutes(handlers: ServiceHandlers, health: HealthService | undefined) {
  return (router: ConnectRouter) => {
    router.service(AuthService, handlers.auth);
    router.service(ApiUserService, handlers.apiUsers);
    router.service(UserService, handlers.users);
    router.service(AirCreditService, handlers.airCredits);
    router.service(OperatorService, handlers.operator);
    if (health) {
      registerReflection(router, [...serviceFiles]);
      registerHealth(router, health);
    }
  };
}
