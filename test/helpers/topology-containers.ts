// Postgres and Redis from the topology images (deploy/image/build.sh), each a container on the host
// network on a private port (never the shared 5432/6379), its data on a tmpfs: a throwaway store
// removed by stop() or, at the latest, when the test process exits.
import pg from "pg";
import { createClient } from "redis";
import { imageName, podman } from "./container-image.js";
import { containerName, removeContainer } from "./container.js";
import { freePort } from "./free-port.js";
import { waitFor } from "./wait.js";

export interface StoreContainer {
  readonly url: string;
  stop(): void;
}

/** Starts `image` detached as a fresh container named for `role`; its arguments follow the image. */
function runDetached(role: string, podmanArgs: readonly string[], args: readonly string[]): string {
  const name = containerName(role);
  podman("run", "--detach", "--rm", "--replace", "--name", name, ...podmanArgs, ...args);
  return name;
}

/** The postgres image (trust authentication, no fsync: a throwaway database) on a private loopback port. */
export async function startPostgresContainer(): Promise<StoreContainer> {
  const port = await freePort();
  const name = runDetached(
    "postgres",
    ["--env", "POSTGRES_HOST_AUTH_METHOD=trust", "--env", `PGPORT=${port}`, "--tmpfs", "/var/lib/postgresql/data:U"],
    // Arguments go to postgres. Three replicas' pools and the migration job fit in 40 connections.
    [imageName("postgres"), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=40"],
  );
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await waitFor(
    `the postgres container on port ${port}`,
    async () => {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => {});
      try {
        await client.connect();
        await client.query("SELECT 1");
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => {});
      }
    },
    { intervalMs: 200 },
  );
  return { url, stop: () => removeContainer(name) };
}

/** The redis image on a private loopback port, without persistence. */
export async function startRedisContainer(): Promise<StoreContainer> {
  const port = await freePort();
  const name = runDetached(
    "redis",
    ["--tmpfs", "/var/lib/redis:U"],
    // Arguments go to redis-server.
    [imageName("redis"), "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
  );
  const url = `redis://127.0.0.1:${port}`;
  await waitFor(
    `the redis container on port ${port}`,
    async () => {
      const client = createClient({ url, socket: { reconnectStrategy: false } });
      client.on("error", () => {});
      try {
        await client.connect();
        return (await client.ping()) === "PONG";
      } catch {
        return false;
      } finally {
        client.destroy();
      }
    },
    { intervalMs: 200 },
  );
  return { url, stop: () => removeContainer(name) };
}
