import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { newStorage, serviceEnv } from "../helpers/backend.js";
import { dropStorage } from "../helpers/service.js";
import { runCli, spawnServer, type ServerProcess } from "../helpers/server-process.js";

/**
 * The operator and the lockout (docs/operations.md), as an operator meets it: wrong operator
 * tokens from the operator's own address (a NAT or a balancer shared with an attacker) are refused
 * with 429 once the address has spent its failure budget, yet the right token — the CLI's — is
 * never refused, so `lockout show` and `lockout reset` still run; the operator's count at that
 * address is shown under `--client-id operator` and lifted by `lockout reset`. Before, 200 wrong
 * tokens spent the operator's locked-guess budget and the CLI itself got 429 for 834 s.
 */
describe("CLI: the operator is never locked out of its own surface", { timeout: 300_000 }, () => {
  const storage = newStorage();
  let server: ServerProcess;
  let env: Record<string, string>;
  before(async () => {
    server = await spawnServer(serviceEnv(storage));
    env = serviceEnv(storage, { SERVER_URL: server.address, LOG_LEVEL: "warn" });
  });
  after(async () => {
    await server?.stop(5_000);
    await dropStorage(storage);
  });

  const cli = async (...args: string[]) => {
    const run = await runCli(args, env);
    const shown = `cli ${args.join(" ")} → exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr.slice(0, 1000)}`;
    assert.doesNotMatch(run.stderr, /running in-process/, shown);
    return { ...run, shown };
  };

  /** An operator RPC with a wrong token, from this machine (the CLI's address too). */
  const wrongToken = (i: number) =>
    fetch(`${server.address}/travel.operator.v1.OperatorService/ListTmcs`, {
      method: "POST",
      headers: { authorization: `Bearer wrong-operator-token-${i}`, "content-type": "application/json" },
      body: "{}",
    }).then((r) => r.status);

  test("200 wrong operator tokens from the operator's address: they get 429, the CLI's right token still works; show and reset", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) statuses.push(await wrongToken(i));
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401), "the default budget: 10 failures per 15 minutes");
    assert.deepEqual([...new Set(statuses.slice(10))], [429], "then the guesser is stopped");

    const address = "127.0.0.1";
    const shown = await cli("lockout", "show", "--address", address, "--client-id", "operator");
    assert.equal(shown.code, 0, shown.shown);
    const lockout = JSON.parse(shown.stdout) as Record<string, unknown>;
    assert.equal(lockout.lockedOut, true, shown.shown);
    assert.equal(lockout.failures, 10, shown.shown);
    assert.ok(Number(lockout.resetSeconds) > 0, shown.shown);

    // The right token is never refused, so the operator can work and lift the lockout.
    const tmcs = await cli("tmc", "list");
    assert.equal(tmcs.code, 0, tmcs.shown);
    const reset = await cli("lockout", "reset", "--address", address, "--client-id", "operator");
    assert.equal(reset.code, 0, reset.shown);
    const after = await cli("lockout", "show", "--address", address, "--client-id", "operator");
    assert.equal(after.code, 0, after.shown);
    assert.equal(JSON.parse(after.stdout).lockedOut ?? false, false, after.shown);
    assert.equal(await wrongToken(1000), 401, "lifted: the next wrong token is counted afresh");
  });
});
