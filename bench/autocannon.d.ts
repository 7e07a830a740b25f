// The part of autocannon 9's programmatic API the bench uses (the package ships no types).
declare module "autocannon" {
  import type { EventEmitter } from "node:events";

  namespace autocannon {
    interface Options {
      /** Several: connection i goes to url[i mod n]. */
      url: string | string[];
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      connections?: number;
      /** Seconds. */
      duration?: number;
      pipelining?: number;
      /** Seconds before a request counts as a timeout. */
      timeout?: number;
      /** Milliseconds between samples; the duration is checked on these ticks. */
      sampleInt?: number;
      /** Request sequence; each connection walks it in order, calling setupRequest to build each request. */
      requests?: RequestSpec[];
    }

    interface RequestParams {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
    }

    interface RequestSpec extends RequestParams {
      /** Called for every request built from this entry; returns the request to send. */
      setupRequest?: (
        request: RequestParams & { headers: Record<string, string> },
        context: Record<string, unknown>,
      ) => RequestParams;
    }

    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total?: number;
      p50: number;
      p90: number;
      p99: number;
    }

    interface Result {
      url: string;
      connections: number;
      duration: number;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      statusCodeStats: Record<string, { count: number }>;
      latency: Histogram;
      requests: Histogram & { sent: number };
    }

    /** Emits "response" (client, statusCode, responseBytes, responseTimeMs) and "reqError" (error). */
    interface Instance extends EventEmitter {
      stop(): void;
    }
  }

  function autocannon(
    options: autocannon.Options,
    callback: (error: Error | null, result: autocannon.Result) => void,
  ): autocannon.Instance;

  export = autocannon;
}
