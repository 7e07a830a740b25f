/**
 * Characters an error message never carries raw: C0 controls, DEL, C1 controls and lone UTF-16
 * surrogates (text that is not valid Unicode). A lone surrogate makes gRPC's grpc-message
 * (percent-encoded with encodeURIComponent) impossible to write; controls end up in logs and
 * terminals.
 */
const UNPRINTABLE =
  // eslint-disable-next-line no-control-regex -- control characters are what it finds
  /[\u0000-\u001F\u007F-\u009F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text from a request (a map key, a decoder's complaint quoting the input) made safe to echo in
 * an error message: each unprintable character as `\uXXXX`, cut to `maxLength` UTF-16 units
 * (never inside a surrogate pair) with "…" when it was longer.
 */
export function printable(text: string, maxLength = Number.POSITIVE_INFINITY): string {
  let out = text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  if (out.length > maxLength) {
    let end = maxLength;
    const last = out.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    out = `${out.slice(0, end)}…`;
  }
  return out;
}

/** The text as well-formed Unicode: lone surrogates become U+FFFD (String.prototype.toWellFormed, Node 20). */
export function wellFormed(text: string): string {
  const s = text as string & { isWellFormed(): boolean; toWellFormed(): string };
  return s.isWellFormed() ? text : s.toWellFormed();
}
