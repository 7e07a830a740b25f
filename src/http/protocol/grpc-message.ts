/**
 * grpc-message as the gRPC over HTTP/2 spec writes it ("Percent-Encoded"): the UTF-8 bytes of the
 * message, each byte outside 0x20-0x7E and "%" itself as %XX, everything else as it is. Connect
 * writes it with encodeURIComponent, which also escapes ":" or "/" — and grpc-js decodes with
 * decodeURI, which leaves those escapes in place, so its users read "Authorization%3A Bearer"
 * (issue 19). A leading or trailing space is escaped too: HTTP trims field values, and %20 is
 * decoded by every reader.
 */
export function encodeGrpcMessage(message: string): string {
  const bytes = Buffer.from(message, "utf8");
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    const edgeSpace = byte === 0x20 && (i === 0 || i === bytes.length - 1);
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25 && !edgeSpace
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Rewrites a grpc-message that Connect wrote (fully percent-encoded) in the spec's encoding. */
export function respecGrpcMessage(fields: Headers | undefined): void {
  const written = fields?.get("grpc-message");
  if (!fields || written === null || written === undefined) return;
  let message: string;
  try {
    message = decodeURIComponent(written);
  } catch {
    // Not something Connect wrote: leave it.
    return;
  }
  fields.set("grpc-message", encodeGrpcMessage(message));
}
