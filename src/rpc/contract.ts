import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { access, type AccessRule } from "../../gen/travel/common/v1/access_pb.js";
import {
  authentication,
  AuthenticationKind,
  method_authentication,
} from "../../gen/travel/common/v1/authentication_pb.js";
import { error_dialect, ErrorDialect } from "../../gen/travel/common/v1/error_pb.js";

export { AuthenticationKind, ErrorDialect };

/**
 * What the contract declares about each RPC, read from its options: who may call it and how
 * its errors are worded. The authentication interceptor, the error translation, the REST
 * gateway and the OpenAPI generator all ask here, so no service is special-cased by name.
 */
export const authenticationOf = memoized(
  (method: DescMethod): AuthenticationKind =>
    getOption(method, method_authentication) || getOption(method.parent, authentication),
);

export const errorDialectOf = memoized((service: DescService): ErrorDialect => getOption(service, error_dialect));

export const accessRuleOf = memoized((method: DescMethod): AccessRule => getOption(method, access));

/** Options never change; reading one decodes it anew each time (a few % of a token request's CPU), so each is read once per descriptor. */
function memoized<D extends object, R>(read: (descriptor: D) => R): (descriptor: D) => R {
  const known = new WeakMap<D, R>();
  return (descriptor) => {
    if (known.has(descriptor)) return known.get(descriptor)!;
    const value = read(descriptor);
    known.set(descriptor, value);
    return value;
  };
}

/**
 * Infrastructure services from vendored contracts that cannot carry our options: gRPC health
 * and reflection are public, as their specifications intend.
 */
export const PUBLIC_INFRASTRUCTURE_PACKAGES: readonly string[] = [
  "grpc.health.v1",
  "grpc.reflection.v1",
  "grpc.reflection.v1alpha",
];

export function isPublicInfrastructure(service: DescService): boolean {
  return PUBLIC_INFRASTRUCTURE_PACKAGES.includes(service.file.proto.package);
}
