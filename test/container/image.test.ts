// The service image (deploy/image/build.sh) run as an operator runs it: a read-only root
// filesystem, a tmpfs for /tmp and one volume for DATA_DIR, the embedded default (no
// DATABASE_URL/REDIS_URL). It answers /healthz, keeps its data in the volume, runs as a non-root
// user without compiler, npm or manual pages, carries its OCI labels and SBOM, and on SIGTERM
// (podman stop) drains and exits 0.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {
  buildServiceImage,
  imageLabels,
  podman,
  podmanMissing,
  serviceSbomPath,
  treeRevision,
} from "../helpers/container-image.js";
import { freePort } from "../helpers/free-port.js";
import { repoRoot } from "../helpers/server-process.js";
import { waitFor } from "../helpers/wait.js";

const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string };

describe("the service image", { skip: podmanMissing }, () => {
  const name = `auth-image-test-${process.pid}`;
  let image = "";
  let baseUrl = "";

  before(async () => {
    image = buildServiceImage();
    const port = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    podman(
      "run",
      "--detach",
      "--name",
      name,
      "--read-only",
      "--tmpfs",
      "/tmp",
      "--volume",
      `${name}:/data`,
      "--env",
      `PORT=${port}`,
      image,
    );
  });

  after(() => {
    podman("rm", "--force", "--ignore", name);
    podman("volume", "rm", "--force", name);
  });

  it("answers /healthz and keeps the embedded database in its one volume", async () => {
    await waitFor(
      "/healthz 200",
      async () => (await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.status === 200,
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    // The operator CLI in the container finds the server through DATA_DIR and creates a TMC.
    const created = JSON.parse(
      podman("exec", name, "node", "dist/src/cli/main.js", "tmc", "create", "--name", "Image TMC"),
    ) as {
      tmcId?: string;
    };
    assert.ok(created.tmcId, "the CLI answered a TMC id");
    const listed = podman("exec", name, "node", "dist/src/cli/main.js", "tmc", "list");
    assert.ok(listed.includes(created.tmcId), "the TMC is listed");
    assert.ok(podman("exec", name, "ls", "/data").trim().split("\n").length > 0, "the volume holds the data");
  });

  it("runs as a non-root user, without compiler, npm or manual pages", () => {
    assert.equal(podman("exec", name, "id", "-u").trim(), "10001");
    const found = podman(
      "exec",
      name,
      "sh",
      "-c",
      "for tool in npm npx gcc cc c++ make tsc; do command -v $tool; done; ls /usr/share/man 2>/dev/null; true",
    );
    assert.equal(found.trim(), "");
  });

  it("carries its OCI labels, with the SBOM beside it", () => {
    const labels = imageLabels(image) ?? {};
    assert.equal(labels["org.opencontainers.image.revision"], treeRevision());
    assert.equal(labels["org.opencontainers.image.version"], packageJson.version);
    assert.ok(labels["org.opencontainers.image.source"], "a source label");
    assert.ok(labels["org.opencontainers.image.licenses"], "a licenses label");
    const sbom = JSON.parse(fs.readFileSync(serviceSbomPath, "utf8")) as {
      bomFormat: string;
      components: { name: string }[];
    };
    assert.equal(sbom.bomFormat, "CycloneDX");
    assert.ok(
      sbom.components.some((component) => component.name === "fastify"),
      "the SBOM lists the dependencies",
    );
    assert.ok(!sbom.components.some((component) => component.name === "typescript"), "and no dev dependency");
  });

  it("drains on SIGTERM and exits 0", () => {
    // podman stop sends the image's stop signal (SIGTERM) to PID 1, Node itself, and waits.
    podman("stop", "--time", "60", name);
    assert.equal(podman("inspect", "--format", "{{.State.ExitCode}}", name).trim(), "0");
    const logs = podman("logs", name);
    assert.match(logs, /"signal":"SIGTERM".*"msg":"shutting down"|"msg":"shutting down".*"signal":"SIGTERM"/);
    assert.match(logs, /drained; closing connections/);
  });
});
