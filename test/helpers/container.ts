// The service image (deploy/image/build.sh) run as the container tier runs it (test/container/):
// each container in the foreground of a `podman run` child (through deploy/image/podman.sh, which
// holds this machine's podman options), so its log lines, SIGTERM and exit status pass through
// podman as they would through a process.
import { spawnSync } from "node:child_process";
import { PODMAN, serviceImage } from "./container-image.js";
import { spawnServer, type ServerProcess } from "./server-process.js";
import { stopAtExit } from "./stop-at-exit.js";

/** A unique container name for this test process: removed (podman rm -f) when the process exits at the latest. */
export function containerName(role: string): string {
  const name = `auth-tier-${process.pid}-${role}`;
  stopAtExit(() => removeContainer(name));
  return name;
}

/** Kills and removes the container `name` if there is one. */
export function removeContainer(name: string): void {
  spawnSync(PODMAN, ["rm", "--force", "--ignore", "--time", "0", name]);
}

export interface ContainerOptions {
  /** More `podman run` options (volumes, --read-only, …). */
  readonly podmanArgs?: readonly string[];
  /** The arguments after the image's entrypoint (node) instead of its own command (the server). */
  readonly command?: readonly string[];
}

/** `podman run` arguments for one container of the service image: the environment given explicitly (none of the runner's). */
function runArgs(name: string, env: Record<string, string>, options: ContainerOptions): string[] {
  return [
    "run",
    "--rm",
    "--replace",
    "--name",
    name,
    ...Object.entries(env).flatMap(([key, value]) => ["--env", `${key}=${value}`]),
    ...(options.podmanArgs ?? []),
    serviceImage,
    ...(options.command ?? []),
  ];
}

/** The service image running in the foreground of `podman run`, once its "service listening" line is out. */
export function startServiceContainer(
  name: string,
  env: Record<string, string>,
  options: ContainerOptions = {},
): Promise<ServerProcess> {
  return spawnServer({}, { command: { file: PODMAN, args: runArgs(name, env, options) } });
}

/** Runs a container of the service image to its end (a job): its exit code and output. */
export function runContainerToExit(
  name: string,
  env: Record<string, string>,
  options: ContainerOptions = {},
): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(PODMAN, runArgs(name, env, options), { encoding: "utf8", timeout: 600_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
