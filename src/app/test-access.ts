import type { Knex } from "knex";
import type { KeyMaterial } from "../domain/shared/key-material.js";
import type { DomainServices } from "./domain-services.js";

/**
 * What tests may reach inside a running instance that the Service interface does not expose:
 * the raw database handle, the key material and the domain services. Kept in a WeakMap keyed by
 * the Service, so production code has no path to them; test/helpers is the only reader.
 */
export interface ServiceInternals {
  readonly db: Knex;
  readonly keys: KeyMaterial;
  readonly migrate: () => Promise<string[]>;
  /** The instance's domain services, to call one no RPC reaches on its own (resource-server authentication). */
  readonly domain: DomainServices;
}

const internals = new WeakMap<object, ServiceInternals>();

export function registerInternals(service: object, value: ServiceInternals): void {
  internals.set(service, value);
}

export function internalsOf(service: object): ServiceInternals {
  const found = internals.get(service);
  if (!found) throw new Error("not a service built by createService");
  return found;
}
