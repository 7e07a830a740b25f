import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { imageName, PODMAN } from "./container-image.js";
import { removeContainer } from "./container.js";
import { freePort } from "./free-port.js";
import { repoRoot } from "./server-process.js";
import { waitFor } from "./wait.js";

/** Why a test that needs HAProxy cannot run here, or false. */
export const haproxyMissing =
  spawnSync("haproxy", ["-v"]).status !== 0 && "haproxy is not installed (.ci/run installs it)";

// Where the haproxy image (deploy/image/build.sh) reads its configuration.
const IMAGE_CONFIG_DIR = "/usr/local/etc/haproxy";

export interface HaproxyOptions {
  /**
   * Run the haproxy image as this container (a containerName) instead of the machine's haproxy.
   * The tree's deploy/haproxy.cfg is mounted over the image's copy: the one under test, even when
   * the image is of an older revision.
   */
  readonly container?: string;
}

/** HAProxy as deployed (deploy/haproxy.cfg), with the addresses from the environment and a stats page beside it. */
export async function startHaproxy(servers: readonly number[], dir: string, options: HaproxyOptions = {}) {
  const [rest, grpc, stats] = [await freePort(), await freePort(), await freePort()];
  const config = path.join(repoRoot, "deploy/haproxy.cfg");
  const statsConfig = path.join(dir, "stats.cfg");
  fs.writeFileSync(
    statsConfig,
    `frontend stats\n    bind 127.0.0.1:${stats}\n    stats enable\n    stats uri /stats\n`,
  );
  const addresses: Record<string, string> = {
    AUTH_REST_BIND: `127.0.0.1:${rest}`,
    AUTH_GRPC_BIND: `127.0.0.1:${grpc}`,
    ...Object.fromEntries(servers.map((port, i) => [`AUTH_SERVER_${i + 1}`, `127.0.0.1:${port}`])),
  };
  const { container } = options;
  // In the container: the image's entry point (haproxy -db -f <its haproxy.cfg>), then the stats page.
  const child = container
    ? spawn(
        PODMAN,
        [
          "run",
          "--rm",
          "--replace",
          "--name",
          container,
          ...Object.entries(addresses).flatMap(([key, value]) => ["--env", `${key}=${value}`]),
          "--volume",
          `${config}:${IMAGE_CONFIG_DIR}/haproxy.cfg:ro`,
          "--volume",
          `${statsConfig}:${IMAGE_CONFIG_DIR}/stats.cfg:ro`,
          imageName("haproxy"),
          "-f",
          `${IMAGE_CONFIG_DIR}/stats.cfg`,
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      )
    : spawn("haproxy", ["-db", "-f", config, "-f", statsConfig], {
        env: { ...process.env, ...addresses },
        stdio: ["ignore", "pipe", "pipe"],
      });
  const stop = () => (container ? removeContainer(container) : void child.kill("SIGTERM"));
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  /** Each backend server's state as HAProxy sees it, e.g. { "auth_rest/auth1": "UP" }. */
  const states = async (): Promise<Record<string, string>> => {
    const csv = await (await fetch(`http://127.0.0.1:${stats}/stats;csv`)).text();
    const [header = "", ...rows] = csv.trim().split("\n");
    const columns = header.replace(/^# /, "").split(",");
    const status = columns.indexOf("status");
    return Object.fromEntries(
      rows
        .map((row) => row.split(","))
        .filter(([, server]) => server !== "FRONTEND" && server !== "BACKEND")
        .map((cells) => [`${cells[0]}/${cells[1]}`, cells[status] ?? ""]),
    );
  };
  // A container's start takes longer than the process's on a busy machine.
  await waitFor("HAProxy's stats page", () => states().catch(() => undefined), {
    timeoutMs: container ? 60_000 : 10_000,
  });
  return { child, stop, rest: `http://127.0.0.1:${rest}`, grpc: `127.0.0.1:${grpc}`, states, output: () => output };
}
