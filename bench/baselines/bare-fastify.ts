// Baseline: a bare Fastify route (GET / → {"hello":"world"}, no logging) — the ceiling of
// Node + Fastify on this machine, which every other figure can be read against.
import Fastify from "fastify";
import { announce } from "./common.js";

const app = Fastify({ logger: false });
app.get("/", async () => ({ hello: "world" }));
await app.listen({ host: "127.0.0.1", port: 0 });
announce(app.server, () => app.close());
