// The protected services' measurements beside the load rounds: the verifier package's local verification rate
// (a child process, bench/verifier-local.ts) and, in report.ts, the propagation delay to the sample
// protected service (bench/sample-service.ts) measured with bench/invalidation.ts's probe.
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "./server.js";

/** Verifications per second in one round of bench/verifier-local.ts. */
export interface VerifierLocalRound {
  readonly bare: number;
  readonly firstSight: number;
  readonly cached: number;
  /** verifyRequest on a cached token: Bearer, and DPoP with a fresh proof each (absent in runs before issue 35). */
  readonly bearerRequest?: number;
  readonly dpopRequest?: number;
}

/** A DPoP-bound token for the sample audience, a Bearer one, and the key the bound one's proofs are signed with. */
export interface VerifierDpopInput {
  readonly bound: string;
  readonly bearer: string;
  readonly privateKeyPem: string;
  readonly publicJwk: object;
}

export interface VerifierLocalRun {
  readonly tokens: number;
  readonly rounds: readonly VerifierLocalRound[];
}

/** Runs bench/verifier-local.ts on `tokens` (distinct, for the sample audience) and returns its rounds. */
export async function runVerifierLocal(
  env: Record<string, string>,
  tokens: readonly string[],
  dpop: VerifierDpopInput,
): Promise<VerifierLocalRun> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-verifier-"));
  const tokensFile = path.join(dir, "tokens.json");
  fs.writeFileSync(tokensFile, JSON.stringify(tokens));
  const dpopFile = path.join(dir, "dpop.json");
  fs.writeFileSync(dpopFile, JSON.stringify(dpop));
  try {
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ["--expose-gc", "--import", "tsx", path.join("bench", "verifier-local.ts")],
        {
          cwd: repoRoot,
          env: { ...process.env, ...env, VERIFIER_TOKENS_FILE: tokensFile, VERIFIER_DPOP_FILE: dpopFile },
          maxBuffer: 1 << 20,
          timeout: 600_000,
        },
        (error, out, err) => (error ? reject(new Error(`verifier-local: ${error.message}\n${err}`)) : resolve(out)),
      ),
    );
    const line = stdout.trim().split("\n").at(-1) ?? "";
    const { rounds } = JSON.parse(line) as { rounds: VerifierLocalRound[] };
    return { tokens: tokens.length, rounds };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
