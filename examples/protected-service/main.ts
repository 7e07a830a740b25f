// Runs the sample protected service: AUTH_URL, ISSUER, AUDIENCE, RS_CLIENT_ID, RS_CLIENT_SECRET,
// HOST (default 127.0.0.1), PORT (REST, default 8080) and RPC_PORT (gRPC/Connect/gRPC-Web over plaintext HTTP/2, default 50061).
import { setting, startProtectedService, verifierOptionsFromEnv } from "./service.js";

const running = await startProtectedService({
  verifierOptions: verifierOptionsFromEnv(),
  port: Number(setting("PORT", "8080")),
  rpcPort: Number(setting("RPC_PORT", "50061")),
  host: setting("HOST", "127.0.0.1"),
});
// Until the stream has caught up every token is refused (stale); the service listens anyway.
await running.verifier.ready().catch((error: unknown) => console.warn(String(error)));
console.log(`protected service: REST ${running.url}/trips, RPC ${running.rpcUrl}/travel.examples.v1.Trips/WhoAmI`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void running.close());
