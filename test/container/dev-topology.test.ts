// The `dev` topology: one service container of the image, the embedded default, one volume for
// DATA_DIR, a read-only root filesystem and a tmpfs for /tmp, as `podman run` starts it from the
// operations guide. The README's "Five minutes with the service" and "Protect your service" run
// against it as printed (test/helpers/readme-walkthrough.ts), the CLI on the host finding the
// container's server and operator token in the volume, as it finds a local server's in ./data.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newTempDir, removeTempDir } from "../helpers/backend.js";
import { buildServiceImage, podmanMissing } from "../helpers/container-image.js";
import { containerName, startServiceContainer } from "../helpers/container.js";
import { freePort } from "../helpers/free-port.js";
import {
  itPassesBothSections,
  runReadmeWalkthrough,
  walkthroughToolMissing,
  type Walkthrough,
} from "../helpers/readme-walkthrough.js";
import { childEnv, runCli, type ServerProcess } from "../helpers/server-process.js";
import { waitFor } from "../helpers/wait.js";

describe(
  "the dev topology: one container, embedded storage, one volume",
  { skip: podmanMissing || walkthroughToolMissing },
  () => {
    let volume: string;
    let server: ServerProcess | undefined;
    let startToReadyMs: number;
    let walkthrough: Walkthrough;

    // As the image runs by default (no MASTER_KEY or OPERATOR_TOKEN: the server keeps its own in the
    // volume); only the address is this machine's: a private port on the host's loopback.
    const startDev = async () =>
      startServiceContainer(
        containerName("dev"),
        { HOST: "127.0.0.1", PORT: String(await freePort()), SHUTDOWN_DRAIN_MS: "0" },
        { podmanArgs: ["--read-only", "--tmpfs", "/tmp", "--volume", `${volume}:/data:U`] },
      );

    before(async () => {
      buildServiceImage();
      volume = newTempDir();
      const started = Date.now();
      server = await startDev();
      await waitFor("the container's /readyz", async () => (await fetch(`${server!.address}/readyz`)).ok, {
        timeoutMs: 120_000,
        intervalMs: 100,
      });
      startToReadyMs = Date.now() - started;
      console.log(`dev container: start to ready in ${startToReadyMs} ms`);
      walkthrough = await runReadmeWalkthrough(server.port, volume, childEnv({ DATA_DIR: volume }));
    });
    after(async () => {
      await server?.stop();
      if (volume) removeTempDir(volume);
    });

    itPassesBothSections(() => walkthrough);

    it("stops on SIGTERM with exit 0; started again on the same volume, it has kept its data and secrets", async () => {
      const stopped = await server!.stop(30_000);
      assert.deepEqual(stopped, { code: 0, signal: null }, server!.stderr());
      server = await startDev();
      // The CLI finds the new container's address and the same operator token in the volume.
      const listed = await runCli(["tmc", "list"], { DATA_DIR: volume });
      assert.equal(listed.code, 0, listed.stderr);
      const names = (JSON.parse(listed.stdout) as { tmcs: Array<{ name: string }> }).tmcs.map((tmc) => tmc.name);
      assert.deepEqual(names, ["Globetrotter TMC"]);
    });
  },
);
