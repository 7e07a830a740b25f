/**
 * Text no request may carry: control characters (C0 except tab, line feed and carriage return,
 * and DEL) and lone UTF-16 surrogates (text that was not valid Unicode). Postgres cannot store
 * NUL in text, and the others end up in logs, terminals and the audit trail. One rule for every
 * field of every message (the RPC text interceptor) and for credentials that arrive in headers
 * (HTTP Basic on the token endpoints).
 */
export const FORBIDDEN_TEXT =
  // eslint-disable-next-line no-control-regex -- control characters are what it finds
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function holdsForbiddenText(text: string): boolean {
  return FORBIDDEN_TEXT.test(text);
}
