import type { DescFile, DescService } from "@bufbuild/protobuf";
import { file_travel_common_v1_error } from "../../gen/travel/common/v1/error_pb.js";
import type { Face } from "./area.js";
import type { Verifiers } from "./interceptors/authentication-interceptor.js";
import { airCreditArea } from "./services/air-credit-service.js";
import { apiUserArea } from "./services/api-user-service.js";
import { authArea } from "./services/auth-service.js";
import { operatorArea } from "./services/operator-service.js";
import { scimArea } from "./services/scim-service.js";
import { userArea } from "./services/user-service.js";

/**
 * The registry: every service of the contract, one entry each (its record sits next to its handler,
 * src/rpc/services/). Both faces' routes, reflection, gRPC health, the in-process transport, the
 * REST gateway and the OpenAPI document derive from this list, in this order; nothing else names a
 * service to serve it (test/unit/rpc/areas.test.ts checks both).
 */
export const AREAS = [authArea, apiUserArea, userArea, airCreditArea, operatorArea, scimArea] as const;

type AnyArea = (typeof AREAS)[number];

/** Every service of the contract; the REST gateway exposes those whose methods have HTTP rules. */
export const contractServices: readonly DescService[] = AREAS.map((area) => area.service);

/** The intersection of a union's members. */
type AllOf<U> = (U extends unknown ? (each: U) => void : never) extends (all: infer I) => void ? I : never;

/**
 * The domain services the RPC core translates to: whatever the areas' handlers are built from (each
 * record says what it reads), and the verifiers the authentication interceptor dispatches to.
 */
export type RpcDomain = AllOf<Parameters<AnyArea["bind"]>[0]> & { readonly verifiers: Verifiers };

/**
 * The areas served on `face`, in the registry's order. Without an admin face (`adminFace` false)
 * the public face serves every area; with one, each area is served on its own face only.
 */
export function areasOn(face: Face, adminFace: boolean): AnyArea[] {
  return AREAS.filter((area) => (adminFace ? area.face === face : face === "public"));
}

/** The fully qualified names of the services served on `face` (what its gRPC health reports on). */
export function serviceNamesOn(face: Face, adminFace: boolean): string[] {
  return areasOn(face, adminFace).map((area) => area.service.typeName);
}

/**
 * The files reflection serves on `face`: its services' proto files, and the ErrorResponse detail so
 * tools such as `buf curl` can show error details instead of base64.
 */
export function reflectionFilesOn(face: Face, adminFace: boolean): DescFile[] {
  return [...new Set([...areasOn(face, adminFace).map((area) => area.service.file), file_travel_common_v1_error])];
}
