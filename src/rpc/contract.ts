import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { access, type AccessRule } from "../../gen/travel/common/v1/access_pb.js";
import { authentication, AuthenticationKind, method_authentication } from "../../gen/travel/common/v1/authentication_pb.js";
import { error_dialect, ErrorDialect } from "../../gen/travel/common/v1/error_pb.js";

export { AuthenticationKind, ErrorDialect };

/**
 * What the contract declares about each RPC, read from its options: who may call it and how
 * its errors are worded. The authentication interceptor, the error translation, the REST
 * gateway and the OpenAPI generator all ask here, so no service is special-cased by name.
 */
export function authenticationOf(method: DescMethod): AuthenticationKind {
  return getOption(method, method_authentication) || getOption(method.parent, authentication);
}

export function errorDialectOf(service: DescService): ErrorDialect {
  return getOption(service, error_dialect);
}

export function accessRuleOf(method: DescMethod): AccessRule {
  return getOption(method, access);
}

/**
 * Infrastructure services from vendored contracts that cannot carry our options: gRPC health
 * and reflection are public, as their specifications intend.
 */
export const PUBLIC_INFRASTRUCTURE_PACKAGES: readonly string[] = ["grpc.health.v1", "grpc.reflection.v1", "grpc.reflection.v1alpha"];

export function isPublicInfrastructure(service: DescService): boolean {
  return PUBLIC_INFRASTRUCTURE_PACKAGES.includes(service.file.proto.package);
}
