// The README's "Five minutes with the service" and "Protect your service", run as a reader runs
// them (test/helpers/readme-walkthrough.ts) against a server started as `npm start` starts it (the
// embedded default, no secrets given: the server keeps its own in DATA_DIR, where the CLI finds it).
// test/container/ runs the same walk-through against the service's image.
import { after, before, describe } from "node:test";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import {
  itPassesBothSections,
  runReadmeWalkthrough,
  walkthroughToolMissing,
  type Walkthrough,
} from "../helpers/readme-walkthrough.js";
import { childEnv, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

const skip = isPostgres
  ? "the README's walk-through runs on the embedded default (./data); the Postgres backend is not what it describes"
  : walkthroughToolMissing;

describe("the README's walk-through, as printed", { skip }, () => {
  let storage: Storage;
  let server: ServerProcess;
  let walkthrough: Walkthrough;

  before(async () => {
    storage = newStorage();
    // As `npm start` runs: no MASTER_KEY, OPERATOR_TOKEN or TOKEN_ISSUER, only a port of its own.
    server = await spawnServer({
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "info",
      SHUTDOWN_TIMEOUT_MS: "500",
      SHUTDOWN_DRAIN_MS: "0",
      ...storage.env,
    });
    walkthrough = await runReadmeWalkthrough(server.port, storage.dataDir, childEnv({ DATA_DIR: storage.dataDir }));
  });
  after(async () => {
    await server?.stop();
    if (storage) await dropStorage(storage);
  });

  itPassesBothSections(() => walkthrough);
});
