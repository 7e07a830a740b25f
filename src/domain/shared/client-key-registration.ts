import type { JSONWebKeySet } from "jose";
import { invalidArgument } from "../../errors/domain-error.js";
import { clientKeySetOf, registeredKeyIds } from "./client-assertion.js";
import type { RemoteKeySets } from "./remote-key-sets.js";

/** A key registration (private_key_jwt): an inline JWK Set or the URL of one, exactly one of them. */
export interface ClientKeyRegistration {
  readonly jwks?: unknown;
  readonly jwksUri?: string;
}

/** What a registration answers: the keys' ids (`#index` for a key without one), and the URL when the set is registered by URL. */
export interface RegisteredClientKeys {
  readonly keyIds: string[];
  readonly jwksUri?: string;
}

/** A checked registration as stored (one of publicKeys and jwksUri null), and the keys it names now. */
export interface CheckedKeyRegistration {
  readonly publicKeys: JSONWebKeySet | null;
  readonly jwksUri: string | null;
  readonly keys: JSONWebKeySet;
}

/**
 * A registration checked, for any kind of client: exactly one of an inline set and a URL, the set
 * valid. A URL is fetched now and its set checked (RemoteKeySets.registered: an unusable one is
 * 400 with its reason); `beforeFetch` runs first (the caller's check that the client is its own:
 * nobody makes the service fetch for a client it does not manage).
 */
export async function checkedKeyRegistration(
  { jwks, jwksUri }: ClientKeyRegistration,
  keySets: Pick<RemoteKeySets, "registered">,
  beforeFetch: () => Promise<void> = async () => {},
): Promise<CheckedKeyRegistration> {
  if ((jwks === undefined) === (jwksUri === undefined))
    throw invalidArgument("Register either jwks or jwks_uri, exactly one of them", [
      { name: "jwksUri", value: jwks === undefined ? "neither given" : "both given" },
    ]);
  if (jwksUri === undefined) {
    const publicKeys = await clientKeySetOf(jwks);
    return { publicKeys, jwksUri: null, keys: publicKeys };
  }
  await beforeFetch();
  const registered = await keySets.registered(jwksUri);
  return { publicKeys: null, jwksUri: registered.uri, keys: registered.keys };
}

/** What a registration answers: the ids of the keys it names now, and its URL when registered by URL. */
export function registeredKeysOf({ keys, jwksUri }: CheckedKeyRegistration): RegisteredClientKeys {
  const keyIds = registeredKeyIds(keys);
  return jwksUri === null ? { keyIds } : { keyIds, jwksUri };
}
