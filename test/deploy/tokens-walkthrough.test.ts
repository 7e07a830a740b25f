// docs/tokens.md's walk-through of a key instead of a secret and a DPoP-bound token, run as a
// reader runs it (test/helpers/readme-walkthrough.ts): after the README's five minutes, whose
// variables it uses, against a server started as `npm start` starts it (the embedded default).
import { after, before, describe, it } from "node:test";
import { freePort } from "../helpers/free-port.js";
import { isPostgres, newStorage, type Storage } from "../helpers/backend.js";
import {
  assertFiveMinutes,
  assertKeysAndDpop,
  assertRanToEnd,
  FIVE_MINUTES,
  KEYS_AND_DPOP,
  runReadmeWalkthrough,
  walkthroughToolMissing,
  type Walkthrough,
} from "../helpers/readme-walkthrough.js";
import { childEnv, spawnServer, type ServerProcess } from "../helpers/server-process.js";
import { dropStorage } from "../helpers/service.js";

const skip = isPostgres
  ? "the walk-through continues the README's, which runs on the embedded default (./data)"
  : walkthroughToolMissing;

describe("docs/tokens.md's walk-through of keys and DPoP, as printed", { skip }, () => {
  let storage: Storage;
  let server: ServerProcess;
  let walkthrough: Walkthrough;

  before(async () => {
    storage = newStorage();
    // `npm start` listens on every address, so its issuer is http://localhost:PORT, which the
    // client's discovery checks; here it listens on loopback only, under the same issuer.
    const port = await freePort();
    server = await spawnServer({
      HOST: "127.0.0.1",
      PORT: String(port),
      TOKEN_ISSUER: `http://localhost:${port}`,
      LOG_LEVEL: "info",
      SHUTDOWN_TIMEOUT_MS: "500",
      SHUTDOWN_DRAIN_MS: "0",
      ...storage.env,
    });
    walkthrough = await runReadmeWalkthrough(server.port, storage.dataDir, childEnv({ DATA_DIR: storage.dataDir }), [
      FIVE_MINUTES,
      KEYS_AND_DPOP,
    ]);
  });
  after(async () => {
    await server?.stop();
    if (storage) await dropStorage(storage);
  });

  it("runs to its end without a failing command", () => assertRanToEnd(walkthrough, 3));
  it("the five minutes before it still print what they print", () => assertFiveMinutes(walkthrough));
  it("keys registered, the secret refused, bearer and DPoP-bound tokens read Ada's profile, the CLI replaces the set, then requires DPoP (a request without a proof refused)", () =>
    assertKeysAndDpop(walkthrough));
});
