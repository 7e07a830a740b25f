import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ServiceBinding } from "./in-process-transport.js";

/**
 * Where an area's service is served. `public`: the public port. `admin`: the admin port when one
 * is configured (ADMIN_PORT), and then only there; without one, the public port like the rest.
 */
export type Face = "public" | "admin";

/**
 * One area of the contract as the RPC core registers it: its service descriptor (whose proto file,
 * `service.file`, reflection serves), the face it is served on, and how its handler is built from
 * the domain services it needs (`D`: the members of the RPC core's domain it reads). Each area
 * declares its record next to its handler; `areas.ts` lists them all.
 */
export interface Area<D> {
  readonly service: DescService;
  readonly face: Face;
  /** Builds the handler over the domain services: one per RPC core. */
  readonly bind: (domain: D) => ServiceBinding;
}

/** An area's record; the handler must implement every RPC of the service (ServiceImpl). */
export function defineArea<S extends DescService, D>(area: {
  readonly service: S;
  readonly face: Face;
  readonly handler: (domain: D) => ServiceImpl<S>;
}): Area<D> {
  const { service, face, handler } = area;
  return { service, face, bind: (domain) => ({ service, impl: handler(domain) }) };
}
