/**
 * What the domain reports about itself, without knowing the logging or metrics library: the
 * composition root passes pino's logger and prom-client's counters, which fit these shapes.
 */
export interface Logger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
  debug(object: object, message: string): void;
}

export interface Counter {
  inc(value?: number): void;
}

export interface LabelledCounter<L extends string> {
  inc(labels: Partial<Record<L, string>>, value?: number): void;
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {}, debug() {} };
