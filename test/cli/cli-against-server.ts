import assert from "node:assert/strict";
import { after, before } from "node:test";
import { newStorage, serviceEnv } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { runCli, spawnServer, type ServerProcess } from "../helpers/server-process.js";

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * A server on fresh storage for the enclosing suite, and the CLI pointed at it (SERVER_URL). The
 * commands go to the running server, as an operator's usually do; running them in-process when no
 * server answers is test/cli/cli.test.ts's and cli-where-it-runs.test.ts's subject (each such run
 * opens the storage: 4 to 8 s a command, which made the files using this the suite's slowest). A
 * command that fell back to running in-process fails: on Postgres it would succeed unnoticed.
 * Call inside a describe.
 */
export function cliAgainstServer(): (...args: string[]) => Promise<Run> {
  const storage = newStorage();
  let server: ServerProcess | undefined;
  let env: Record<string, string> = {};
  before(async () => {
    server = await spawnServer(serviceEnv(storage));
    env = serviceEnv(storage, { SERVER_URL: server.address, LOG_LEVEL: "warn" });
  });
  after(async () => {
    await server?.stop(5_000);
    await dropStorage(storage);
  });
  return async (...args) => {
    const run = await runCli(args, env);
    assert.doesNotMatch(run.stderr, /running in-process/, `cli ${args.join(" ")} reached the server: ${run.stderr}`);
    return { ...run, code: run.code ?? 1 };
  };
}
