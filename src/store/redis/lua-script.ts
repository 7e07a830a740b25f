import crypto from "node:crypto";
import type { RedisConnection } from "./redis-client.js";

/**
 * A Lua script sent by its SHA1 (`EVALSHA`): a request carries a 40-character digest instead of
 * the whole script, and Redis does not hash the script again on every call. A Redis that does not
 * hold it (restarted, `SCRIPT FLUSH`, failed over to a replica that never saw it) answers
 * `NOSCRIPT`; the call is then sent once more with `EVAL`, which runs the script and caches it,
 * so the next call finds it by its digest again.
 */
export class LuaScript {
  readonly sha1: string;

  constructor(readonly source: string) {
    this.sha1 = crypto.createHash("sha1").update(source).digest("hex");
  }

  async run(redis: RedisConnection, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await redis.evalSha(this.sha1, { keys, arguments: args });
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return redis.eval(this.source, { keys, arguments: args });
    }
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}
