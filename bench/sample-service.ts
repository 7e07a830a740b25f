// The sample protected service (examples/protected-service) as `npm run bench` runs it for the
// propagation scenario: its own process, following the change stream of AUTH_URL, printing
// {"listening": url} once its verifier is caught up.
import { startProtectedService } from "../examples/protected-service/service.js";

const env = process.env;
const required = (name: string): string => {
  const value = env[name];
  if (!value) throw new Error(`sample-service: ${name} is not set`);
  return value;
};
const sample = await startProtectedService({
  verifierOptions: {
    authUrl: required("AUTH_URL"),
    issuer: required("ISSUER"),
    audience: required("AUDIENCE"),
    clientId: required("RS_CLIENT_ID"),
    clientSecret: required("RS_CLIENT_SECRET"),
  },
});
await sample.verifier.ready(30_000);
process.stdout.write(`${JSON.stringify({ listening: sample.url })}\n`);
process.once("SIGTERM", () => void sample.close().finally(() => process.exit(0)));
