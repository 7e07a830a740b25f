/**
 * Every import from the sections of connect-es that it marks "@private Internal code, does not
 * follow semantic versioning" (`@connectrpc/connect/protocol`, `/protocol-connect`,
 * `/protocol-grpc`, `/protocol-grpc-web`), pinned at @connectrpc/connect 2.2.0 (package.json
 * names the exact version, not a range). No other file may import those sections
 * (test/unit/architecture/: rule 13 of dependency-rules.cjs, and a scan of test/ and bench/), so a
 * Connect upgrade is read here: check each
 * export below still exists and means the same, then run the conformance tests CONTRIBUTING.md
 * lists under "Upgrading Connect".
 *
 * Why the protocol layer needs them at all: it rewrites the answers Connect's router gives before
 * the interceptor chain runs (connect-handlers.ts) in the caller's own protocol framing, and it
 * serves unary gRPC straight from HTTP/2 streams (grpc-unary.ts) with Connect's own checks and
 * reasons, so both paths answer the same bytes alike. The public API has neither the framing nor
 * the checks.
 */

// The router's handlers and the answers they return (the shape connect-handlers.ts rewrites);
// an answer's body re-made as an async iterable; a gRPC/Connect envelope (flag byte, length).
export {
  createAsyncIterable,
  encodeEnvelope,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";

// Connect's own checks, used by the lean gRPC path so that it refuses what Connect's router
// refuses, with Connect's words: an unknown grpc-encoding (compressionNegotiate), a compressed
// envelope the call named no encoding for (envelopeDecompress), a message that does not decode
// ("parse binary: …", the binary serialization of createMethodSerializationLookup), the default
// read/write limits that serialization wants (validateReadWriteMaxBytes).
export {
  compressionNegotiate,
  createMethodSerializationLookup,
  envelopeDecompress,
  validateReadWriteMaxBytes,
} from "@connectrpc/connect/protocol";

// Connect's protocol: its unary error body (JSON) read and written, and its streaming end-stream
// envelope (flag and serialization), where a streaming call's error travels.
export {
  createEndStreamSerialization,
  endStreamFlag,
  errorFromJsonBytes,
  errorToJsonBytes,
} from "@connectrpc/connect/protocol-connect";

// gRPC: an error as grpc-status / grpc-message / grpc-status-details-bin and back, and the
// grpc-timeout header's parser (its refusal is Connect's "invalid grpc timeout value").
export { findTrailerError, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

// gRPC-Web: its trailers travel in the body's last envelope, flagged, in HTTP/1 header syntax.
export { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";

/**
 * Reasons Connect 2.2.0's protocol layer gives that no export produces on its own (they are
 * written inside its unexported ensureSingle and envelope reader, invoke-implementation.js and
 * envelope.js); the lean gRPC path gives the same ones, so a caller cannot tell which path
 * answered. protocol-errors.ts reads them (and Connect's other reasons) into catalogue errors.
 */
export const CONNECT_REASONS = {
  missingUnaryMessage: "protocol error: missing input message for unary method",
  extraUnaryMessage: "protocol error: received extra input message for unary method",
  incompleteEnvelope: "protocol error: incomplete envelope",
} as const;
