// The sample protected service (examples/protected-service) as `npm run bench` runs it for the
// propagation scenario: its own process, following the change stream of AUTH_URL, printing
// {"listening": url} once its verifier is caught up.
import { startProtectedService, verifierOptionsFromEnv } from "../examples/protected-service/service.js";

const sample = await startProtectedService({ verifierOptions: verifierOptionsFromEnv() });
await sample.verifier.ready(30_000);
process.stdout.write(`${JSON.stringify({ listening: sample.url })}\n`);
process.once("SIGTERM", () => void sample.close().finally(() => process.exit(0)));
