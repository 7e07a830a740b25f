/** A setting that is missing or malformed: the process reports it and exits with code 2. */
export class ConfigError extends Error {}
