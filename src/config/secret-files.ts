import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { makeDataDir } from "../store/data-dir.js";
import { ConfigError } from "./config-error.js";
import type { Config } from "./config.js";

/**
 * The deployment's two secrets: MASTER_KEY and OPERATOR_TOKEN from the environment (or the files
 * MASTER_KEY_FILE and OPERATOR_TOKEN_FILE name), or, when absent, generated once and kept in
 * DATA_DIR with owner-only permissions.
 */
export interface LoadedSecrets {
  readonly masterKey: Buffer;
  readonly operatorToken: string;
  /** Where each came from, for the start log: "environment" or the file's path. */
  readonly sources: { readonly masterKey: string; readonly operatorToken: string };
}

export function loadSecrets(config: Pick<Config, "secrets" | "storage">): LoadedSecrets {
  const { dataDir } = config.storage;
  const { masterKey: givenKey, operatorToken: givenToken } = config.secrets;
  const masterKeyFile = path.join(dataDir, "master.key");
  const masterKey = givenKey
    ? decodeMasterKey(
        givenKey.value,
        givenKey.source === "environment" ? "MASTER_KEY" : `MASTER_KEY_FILE (${givenKey.source})`,
      )
    : decodeMasterKey(
        readOrCreateSecretFile(masterKeyFile, () => crypto.randomBytes(32).toString("base64")),
        masterKeyFile,
      );
  const operatorToken =
    givenToken?.value ??
    readOrCreateSecretFile(operatorTokenFile(dataDir), () => crypto.randomBytes(32).toString("base64url"));
  checkOperatorToken(
    operatorToken,
    givenToken
      ? givenToken.source === "environment"
        ? "OPERATOR_TOKEN"
        : `OPERATOR_TOKEN_FILE (${givenToken.source})`
      : operatorTokenFile(dataDir),
  );
  return {
    masterKey,
    operatorToken,
    sources: {
      masterKey: givenKey?.source ?? masterKeyFile,
      operatorToken: givenToken?.source ?? operatorTokenFile(dataDir),
    },
  };
}

export function operatorTokenFile(dataDir: string): string {
  return path.join(dataDir, "operator-token");
}

/**
 * The operator credential opens every tenant: at least 32 characters (the generated one has 43,
 * 256 bits) and not a repetition of a few characters (a rough guard against "password…" and
 * "aaaa…"; a random token of that length easily passes).
 */
export function checkOperatorToken(token: string, source: string): void {
  if (token.length < 32)
    throw new ConfigError(`${source} must be at least 32 characters of a random token (e.g. openssl rand -base64 32)`);
  if (new Set(token).size < 12)
    throw new ConfigError(`${source} is not random enough: use a random token (e.g. openssl rand -base64 32)`);
}

function decodeMasterKey(value: string, source: string): Buffer {
  const key = Buffer.from(value.trim(), "base64");
  if (key.length < 32) throw new ConfigError(`${source} must be base64 of at least 32 random bytes`);
  return key;
}

/** Reads a secret kept in DATA_DIR, creating it (mode 0600) on first use; safe if two processes race. */
export function readOrCreateSecretFile(file: string, generate: () => string): string {
  makeDataDir(path.dirname(file));
  try {
    fs.writeFileSync(file, generate() + "\n", { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  return fs.readFileSync(file, "utf8").trim();
}
