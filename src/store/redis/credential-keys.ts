/**
 * Where credential states live in Redis, in every mode (standalone, Sentinel, Cluster: one
 * layout, so switching mode needs no migration). Client ids are spread over BUCKETS buckets by a
 * hash of the id; a bucket's keys share a Redis Cluster hash tag (`{<bucket>}`), so they sit in
 * one slot, and each bucket carries its own watermark beside its states. A shard that lost writes
 * (a restart without persistence, a failover to a lagging replica) loses them together with its
 * watermark's rise, so readers of its buckets see a watermark behind the changes they know of.
 */
export const BUCKETS = 64;

/** The bucket of a client id: FNV-1a over its UTF-16 code units (cheap; only the spread matters). */
export function bucketOf(clientId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < clientId.length; i++) {
    hash ^= clientId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % BUCKETS;
}

/** `<prefix>cred:{<bucket>}:<clientId>`: `g:<generation>:<change>` or `r:<change>` (revoked). */
export const credentialKey = (keyPrefix: string, clientId: string): string =>
  `${keyPrefix}cred:{${bucketOf(clientId)}}:${clientId}`;

/** `<prefix>cred-watermark:{<bucket>}`: the highest change the bucket has every state up to (no TTL). */
export const watermarkKey = (keyPrefix: string, bucket: number): string => `${keyPrefix}cred-watermark:{${bucket}}`;
