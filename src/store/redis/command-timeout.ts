/**
 * A Redis answer or a timeout, whichever comes first. node-redis has no deadline for a command
 * already sent (a SIGSTOPped or partitioned Redis keeps the connection open and never answers),
 * so every call the hot path makes to Redis goes through this; the late answer is discarded.
 */
export function withinTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisTimeout(timeoutMs)), timeoutMs);
  });
  work.catch(() => {}); // a late failure after the timeout must not surface as unhandled
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export class RedisTimeout extends Error {
  constructor(timeoutMs: number) {
    super(`Redis did not answer within ${timeoutMs} ms`);
    this.name = "RedisTimeout";
  }
}
