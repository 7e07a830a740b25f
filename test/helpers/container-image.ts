import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { repoRoot } from "./server-process.js";

/** podman with this project's options (deploy/image/podman.sh: runtime, cgroups, network, rlimits). */
export const PODMAN = path.join(repoRoot, "deploy/image/podman.sh");
const BUILD = path.join(repoRoot, "deploy/image/build.sh");

/** Why a test that needs container images cannot run here, or false. */
export const podmanMissing =
  (spawnSync("podman", ["--version"]).status !== 0 && "podman is not installed (.ci/run installs it)") ||
  (spawnSync("mmdebstrap", ["--version"]).status !== 0 && "mmdebstrap is not installed (.ci/run installs it)");

/** Runs podman (through deploy/image/podman.sh) and returns its stdout; throws with its stderr on failure. */
export function podman(...args: string[]): string {
  const result = spawnSync(PODMAN, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0)
    throw new Error(`podman ${args.join(" ")} exited ${result.status}: ${result.stderr || result.stdout}`);
  return result.stdout;
}

const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string };

/** What deploy/image/build.sh builds: the service and the images of the local topology. */
export type ImageTarget = "service" | "postgres" | "redis" | "pgbouncer" | "haproxy";

/** An image's name as deploy/image/build.sh tags it. */
export const imageName = (target: ImageTarget): string => `localhost/auth-${target}:${packageJson.version}`;

/** The service image's name. */
export const serviceImage = imageName("service");

/** The commit the image of this tree carries in its revision label (as deploy/image/build.sh writes it). */
export function treeRevision(): string {
  const git = (...args: string[]) => spawnSync("git", ["-C", repoRoot, ...args], { encoding: "utf8" });
  const head = git("rev-parse", "HEAD").stdout.trim();
  return git("diff", "--quiet", "HEAD", "--").status === 0 ? head : `${head}-dirty`;
}

/** The image's OCI labels, or undefined when there is no such image. */
export function imageLabels(image: string): Record<string, string> | undefined {
  const result = spawnSync(PODMAN, ["image", "inspect", "--format", "{{json .Labels}}", image], { encoding: "utf8" });
  return result.status === 0 ? (JSON.parse(result.stdout) as Record<string, string>) : undefined;
}

/** The CycloneDX SBOM deploy/image/build.sh writes beside the service image (IMAGE_OUT_DIR's default). */
export const serviceSbomPath = path.join(repoRoot, "dist/image", `service-${packageJson.version}.cdx.json`);

/**
 * The service image of this tree and its SBOM: built by deploy/image/build.sh unless an image of
 * this very revision exists with its SBOM beside it (its root filesystem is cached, so a rebuild
 * takes the npm and tsc steps only). Podman's store outlives a clone; dist/ does not, so an image
 * of this revision built from another clone is built again here.
 */
export function buildServiceImage(): string {
  const current = imageLabels(serviceImage)?.["org.opencontainers.image.revision"] === treeRevision();
  if (!current || !fs.existsSync(serviceSbomPath)) build(["service"]);
  return serviceImage;
}

/**
 * Topology images (Postgres, Redis, …) built by deploy/image/build.sh where missing. Whatever
 * revision an existing one is of serves: they hold Debian's packages, and what the project adds to
 * them (deploy/haproxy.cfg) the tests mount from the tree.
 */
export function buildTopologyImages(...targets: Exclude<ImageTarget, "service">[]): void {
  const missing = targets.filter((target) => imageLabels(imageName(target)) === undefined);
  if (missing.length > 0) build(missing);
}

function build(targets: readonly ImageTarget[]): void {
  const result = spawnSync(BUILD, targets, { encoding: "utf8", stdio: ["ignore", "inherit", "pipe"] });
  if (result.status !== 0) throw new Error(`deploy/image/build.sh exited ${result.status}: ${result.stderr}`);
}
