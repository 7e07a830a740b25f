import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * A new embedded database spends most of its first start in PGlite's initdb (12 s of a 14 s start
 * on this machine under load; reopening the same directory takes 0.6 s), and the embedded tier
 * starts a fresh DATA_DIR per test server. So each new test DATA_DIR gets a copy of one empty
 * cluster, made once per machine and PGlite version. Only initdb is skipped: migrations and
 * everything else still run at each start, as they do in production. A test about a DATA_DIR with
 * no database yet asks newStorage for an empty one.
 */
const pgliteVersion = (
  JSON.parse(
    fs.readFileSync(new URL("../../node_modules/@electric-sql/pglite/package.json", import.meta.url), "utf8"),
  ) as { version: string }
).version;
const TEMPLATE = path.join(os.tmpdir(), `auth-svc-pglite-template-${pgliteVersion}`);
const MAKER = fileURLToPath(new URL("./make-pglite-template.mjs", import.meta.url));

/** Copies the empty cluster into `directory` (which must not exist), making the cluster first if needed. */
export function copyEmptyEmbeddedDatabase(directory: string): void {
  if (!fs.existsSync(path.join(TEMPLATE, "PG_VERSION"))) makeTemplate();
  fs.cpSync(TEMPLATE, directory, { recursive: true });
}

/** Made aside and renamed into place, so parallel test processes never see half a cluster. */
function makeTemplate(): void {
  const aside = fs.mkdtempSync(`${TEMPLATE}-making-`);
  try {
    execFileSync(process.execPath, [MAKER, path.join(aside, "pglite")], { stdio: "inherit" });
    fs.renameSync(path.join(aside, "pglite"), TEMPLATE);
  } catch (error) {
    // Another process renamed its own first: use that one.
    if (!fs.existsSync(path.join(TEMPLATE, "PG_VERSION"))) throw error;
  } finally {
    fs.rmSync(aside, { recursive: true, force: true });
  }
}
