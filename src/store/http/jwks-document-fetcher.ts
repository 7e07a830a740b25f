import {
  JWKS_URI_MAX_BYTES,
  KeySetFetchFailed,
  type FetchedJwksDocument,
  type JwksDocumentFetcher,
} from "../../domain/shared/remote-key-sets.js";

/**
 * A client's `jwks_uri` fetched with Node's fetch (undici) within limits: one deadline for the
 * whole exchange (connect, headers and body), no redirect followed (a 3xx is refused: the URL an
 * admin registered is the one fetched, as node-oidc-provider and Hydra do), at most
 * JWKS_URI_MAX_BYTES read, no cookies or credentials sent.
 */
export class HttpJwksDocumentFetcher implements JwksDocumentFetcher {
  constructor(private readonly timeoutMs: number) {}

  async fetch(uri: string): Promise<FetchedJwksDocument> {
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      const response = await fetch(uri, {
        redirect: "manual",
        credentials: "omit",
        signal,
        headers: { accept: "application/jwk-set+json, application/json" },
      });
      if (response.status >= 300 && response.status < 400) {
        await response.body?.cancel();
        throw new KeySetFetchFailed(`answered a redirect (${response.status}), which is not followed`);
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new KeySetFetchFailed(`answered HTTP ${response.status}`);
      }
      const text = await boundedText(response);
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch {
        throw new KeySetFetchFailed("did not answer JSON");
      }
      return { document, maxAgeSeconds: maxAgeOf(response.headers.get("cache-control")) };
    } catch (error) {
      if (error instanceof KeySetFetchFailed) throw error;
      if (signal.aborted) throw new KeySetFetchFailed(`did not answer within ${this.timeoutMs} ms`);
      throw new KeySetFetchFailed("could not be reached");
    }
  }
}

/** The body as text, refused as soon as it passes the cap (a Content-Length over it is refused unread). */
async function boundedText(response: Response): Promise<string> {
  const tooLarge = () => new KeySetFetchFailed(`answered more than ${JWKS_URI_MAX_BYTES} bytes`);
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > JWKS_URI_MAX_BYTES) {
    await response.body?.cancel();
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader: ReadableStreamDefaultReader<Uint8Array> | undefined = response.body?.getReader();
  for (let read = await reader?.read(); read && !read.done; read = await reader!.read()) {
    size += read.value.byteLength;
    if (size > JWKS_URI_MAX_BYTES) {
      await reader!.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(read.value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Cache-Control's lifetime in seconds: max-age, 0 for no-store or no-cache, undefined when it says none. */
export function maxAgeOf(cacheControl: string | null): number | undefined {
  if (!cacheControl) return undefined;
  const directives = cacheControl
    .toLowerCase()
    .split(",")
    .map((d) => d.trim());
  if (directives.includes("no-store") || directives.includes("no-cache")) return 0;
  const maxAge = directives.find((d) => d.startsWith("max-age="));
  const seconds = maxAge === undefined ? NaN : Number(maxAge.slice("max-age=".length));
  return Number.isInteger(seconds) && seconds >= 0 ? seconds : undefined;
}
