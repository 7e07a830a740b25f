import fs from "node:fs";
import { ConfigError } from "./config-error.js";

/** A secret setting's value and where it came from ("environment" or the file's path), for the start log. */
export interface SecretSetting {
  readonly value: string;
  readonly source: string;
}

/**
 * A secret setting from `NAME` or from the file named by `NAME_FILE` (the convention of Docker
 * and Kubernetes secrets, and of the official Postgres image), read once at start. Both set is an
 * error (which one wins would be a guess); so is a file that cannot be read or is empty. Errors
 * name the variable and the file, never the content. Undefined when neither is set.
 */
export function secretSetting(env: NodeJS.ProcessEnv, name: string): SecretSetting | undefined {
  const direct = env[name]?.trim() || undefined;
  const file = env[`${name}_FILE`]?.trim() || undefined;
  if (direct !== undefined && file !== undefined) throw new ConfigError(`Set ${name} or ${name}_FILE, not both`);
  if (file === undefined) return direct === undefined ? undefined : { value: direct, source: "environment" };
  let content: string;
  try {
    content = fs.readFileSync(file, "utf8");
  } catch (error) {
    throw new ConfigError(`${name}_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
  // A trailing newline (echo, an editor, a mounted secret) is not part of the secret.
  const value = content.replace(/\r?\n$/, "").trim();
  if (value === "") throw new ConfigError(`${name}_FILE: ${file} is empty`);
  return { value, source: file };
}
