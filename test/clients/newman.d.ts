// newman ships no types (and @types/newman is not installed): the part the validator harness uses.
declare module "newman" {
  import type { EventEmitter } from "node:events";

  interface RunOptions {
    collection: object;
    environment?: object;
    reporters?: string[];
    timeoutRequest?: number;
    timeout?: number;
    ignoreRedirects?: boolean;
  }
  /** What newman's run events pass (postman-collection SDK objects, read through these fields). */
  interface RunEventArgs {
    readonly item: { readonly name: string; readonly id: string };
    readonly request?: { readonly method: string; readonly url: { toString(): string } };
    readonly response?: { readonly code: number; text(): string };
    readonly assertion?: string;
    readonly error?: { readonly message: string };
  }
  interface RunSummary {
    readonly run: { readonly failures: readonly unknown[] };
  }
  export function run(options: RunOptions, callback?: (error: Error | null, summary: RunSummary) => void): EventEmitter;
}
