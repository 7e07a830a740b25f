// A production-like topology, every part a container of an image from deploy/image/build.sh:
// Postgres and Redis on private ports, the migration job (the service image running the CLI's
// `migrate`), three service replicas with MIGRATE_ON_START=false, and HAProxy with the project's
// deploy/haproxy.cfg in front of them. The README's five
// minutes pass through HAProxy, and a rolling restart of the replicas under REST and gRPC load fails
// no request (test/helpers/rolling-restart.ts, as test/deploy/rolling-restart.test.ts for processes).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newTempDir, TEST_MASTER_KEY, TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import { buildServiceImage, buildTopologyImages, podmanMissing } from "../helpers/container-image.js";
import { containerName, runContainerToExit, startServiceContainer } from "../helpers/container.js";
import { freePort } from "../helpers/free-port.js";
import { startHaproxy } from "../helpers/haproxy.js";
import {
  assertFiveMinutes,
  assertRanToEnd,
  assertResourceServers,
  FIVE_MINUTES,
  runReadmeWalkthrough,
  walkthroughToolMissing,
} from "../helpers/readme-walkthrough.js";
import { assertNoFailedRequest, rollingRestartUnderLoad, waitAllUp } from "../helpers/rolling-restart.js";
import { childEnv, type ServerProcess } from "../helpers/server-process.js";
import { ROOMY_RATE_LIMITS } from "../helpers/token-kit.js";
import { startPostgresContainer, startRedisContainer, type StoreContainer } from "../helpers/topology-containers.js";

const DRAIN_MS = "5000";
const REPLICAS = 3;

describe(
  "the production-like topology: Postgres, Redis, the migration job, three replicas behind HAProxy",
  { skip: podmanMissing || walkthroughToolMissing },
  () => {
    let postgres: StoreContainer | undefined;
    let redis: StoreContainer | undefined;
    let haproxy: Awaited<ReturnType<typeof startHaproxy>> | undefined;
    const replicas: Array<ServerProcess | undefined> = [];
    const ports: number[] = [];
    const names: string[] = [];

    /** What the Deployment gives every replica: the shared stores and secrets, no migrations at start. */
    const replicaEnv = (port: number): Record<string, string> => ({
      HOST: "127.0.0.1",
      PORT: String(port),
      DATA_DIR: "/data",
      DATABASE_URL: postgres!.url,
      REDIS_URL: redis!.url,
      MASTER_KEY: TEST_MASTER_KEY,
      OPERATOR_TOKEN: TEST_OPERATOR_TOKEN,
      TOKEN_ISSUER: "http://auth.test",
      MIGRATE_ON_START: "false",
      SHUTDOWN_DRAIN_MS: DRAIN_MS,
      SHUTDOWN_TIMEOUT_MS: "10000",
      TRUSTED_PROXIES: "127.0.0.1",
      // Three replicas' pools (and the job's) within the Postgres container's 40 connections.
      DATABASE_POOL_MAX: "8",
      // As in every test of this suite (test/helpers/backend.ts serviceEnv): a saturated test machine can take
      // longer than production's 500 ms to open a pooled connection.
      DATABASE_ACQUIRE_TIMEOUT_MS: "10000",
      ...ROOMY_RATE_LIMITS,
    });
    // A read-only root; DATA_DIR (the server's record of its address, nothing durable on Postgres) and
    // /tmp are scratch space, as an emptyDir is in Kubernetes.
    const scratch = ["--read-only", "--tmpfs", "/tmp", "--tmpfs", "/data:U"];
    const startReplica = (i: number) =>
      startServiceContainer(names[i]!, replicaEnv(ports[i]!), { podmanArgs: scratch });

    before(async () => {
      buildServiceImage();
      buildTopologyImages("postgres", "redis", "haproxy");
      [postgres, redis] = await Promise.all([startPostgresContainer(), startRedisContainer()]);
      for (let i = 0; i < REPLICAS; i++) {
        ports.push(await freePort());
        names.push(containerName(`replica-${i + 1}`));
      }
    });

    after(async () => {
      haproxy?.stop();
      await Promise.all(replicas.flatMap((replica) => (replica ? [replica.stop(15_000)] : [])));
      redis?.stop();
      postgres?.stop();
    });

    const migrationJob = () =>
      runContainerToExit(
        containerName("migrate"),
        // No server answers at SERVER_URL: the CLI migrates in-process (docs/operations.md).
        // The Deployment's secrets too: the CLI would otherwise make keys of its own in DATA_DIR.
        {
          DATABASE_URL: postgres!.url,
          SERVER_URL: "http://127.0.0.1:9",
          MASTER_KEY: TEST_MASTER_KEY,
          OPERATOR_TOKEN: TEST_OPERATOR_TOKEN,
        },
        {
          podmanArgs: scratch,
          command: ["dist/src/cli/main.js", "migrate"],
        },
      );

    it("the migration job applies the schema and exits 0; run again, it applies nothing", () => {
      const applied = [migrationJob(), migrationJob()].map((job) => {
        assert.equal(job.code, 0, `${job.stdout}\n${job.stderr}`);
        return (JSON.parse(job.stdout) as { applied: string[] }).applied;
      });
      assert.ok(applied[0]!.length > 0, JSON.stringify(applied));
      assert.deepEqual(applied[1], []);
    });

    it("three replicas start on the migrated schema and HAProxy sees them all UP", async () => {
      const started = await Promise.all(ports.map((_, i) => startReplica(i)));
      replicas.push(...started);
      haproxy = await startHaproxy(ports, newTempDir(), { container: containerName("haproxy") });
      await waitAllUp(haproxy, "HAProxy to see all six servers UP");
    });

    it("the README's five minutes pass through HAProxy", async () => {
      const port = Number(new URL(haproxy!.rest).port);
      // The operator CLI as an operator runs it against a deployment: the balancer's address and the token.
      const walkthrough = await runReadmeWalkthrough(
        port,
        newTempDir(),
        childEnv({ SERVER_URL: haproxy!.rest, OPERATOR_TOKEN: TEST_OPERATOR_TOKEN }),
        [FIVE_MINUTES],
      );
      assertRanToEnd(walkthrough, 2);
      assertFiveMinutes(walkthrough);
      assertResourceServers(walkthrough);
    });

    it(
      "a rolling restart of the replicas under REST and gRPC load fails no request",
      { timeout: 400_000 },
      async () => {
        const outcome = await rollingRestartUnderLoad(haproxy!, replicas, startReplica);
        assertNoFailedRequest(`containers, rolling restart (drain ${DRAIN_MS} ms)`, outcome);
      },
    );
  },
);
