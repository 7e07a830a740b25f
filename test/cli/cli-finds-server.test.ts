// The CLI finds a running server by itself: the server records its address in DATA_DIR while it
// runs (src/store/server-record.ts), so a second terminal with the same DATA_DIR reaches it
// whatever PORT it was started with; SERVER_URL still wins, and the record goes away on stop.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { backend, newStorage, serviceEnv, type Storage } from "../helpers/backend.js";
import { runCli, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";
import { waitFor } from "../helpers/wait.js";

describe(`the CLI finds the server through DATA_DIR (${backend})`, () => {
  const storage: Storage = newStorage();
  let server: ServerProcess | undefined;
  after(async () => {
    if (server && server.child.exitCode === null) server.child.kill("SIGKILL");
    await dropStorage(storage);
  });

  /** Requests for an OperatorService RPC the server logged: the proof the CLI went through it (on Postgres an offline run would succeed too). */
  const served = (rpc: string) =>
    server!
      .logLines()
      .filter(
        (line) =>
          line.msg === "request completed" &&
          (line.req as { url?: string } | undefined)?.url === `/travel.operator.v1.OperatorService/${rpc}`,
      ).length;

  it("a server on a port nobody told the CLI is reached through the record; it is removed on stop", async () => {
    // PORT=0: the server takes any free port, which the CLI's environment does not name.
    server = await spawnServer(serviceEnv(storage));
    const record = JSON.parse(fs.readFileSync(path.join(storage.dataDir, "server.json"), "utf8")) as {
      url: string;
      pid: number;
    };
    assert.equal(record.url, server.address);
    assert.equal(record.pid, server.child.pid);
    assert.equal(fs.statSync(path.join(storage.dataDir, "server.json")).mode & 0o777, 0o600);

    const cliEnv = serviceEnv(storage);
    assert.equal(cliEnv.SERVER_URL, undefined);
    const created = await runCli(["tmc", "create", "--name", "Found Travel"], cliEnv);
    assert.equal(created.code, 0, created.stderr);
    assert.equal((JSON.parse(created.stdout) as { name: string }).name, "Found Travel");
    await waitFor("the server to log the CreateTmc request", async () => served("CreateTmc") === 1);

    // SERVER_URL still wins: pointed elsewhere, the CLI does not use the record.
    const elsewhere = await runCli(["tmc", "create", "--name", "Elsewhere Travel"], {
      ...cliEnv,
      SERVER_URL: "http://127.0.0.1:1",
    });
    if (backend === "embedded")
      assert.match(elsewhere.stderr, /is in use by process/, "offline on the DATA_DIR the server owns");
    assert.equal(served("CreateTmc"), 1, "not through the server");

    server.child.kill("SIGTERM");
    await waitFor("the server to exit", async () => server!.child.exitCode !== null);
    assert.equal(fs.existsSync(path.join(storage.dataDir, "server.json")), false, "the record is removed on stop");
  });

  it("a record left by a killed server is ignored", async () => {
    fs.writeFileSync(
      path.join(storage.dataDir, "server.json"),
      JSON.stringify({ url: "http://127.0.0.1:1", pid: 2 ** 22 + 7 }) + "\n",
    );
    // No server runs: the CLI goes offline on the storage instead of trying the dead address.
    // --init: this test stands alone, whether or not the server of the test before created the store.
    const listed = await runCli(["tmc", "create", "--name", "Offline Travel", "--init"], serviceEnv(storage));
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal((JSON.parse(listed.stdout) as { name: string }).name, "Offline Travel");
  });
});
