/**
 * `--output table`: a response for people. Lists of objects (tmcs, apiUsers, events, issuers)
 * become aligned columns, one row each; every other field is a "name: value" line (an object
 * such as GetTmc's `tmc` is shown field by field). JSON stays the default, for scripts.
 */
export function renderTable(response: Readonly<Record<string, unknown>>): string {
  const lines: Array<[name: string, value: string]> = [];
  const tables: string[] = [];
  for (const [key, value] of Object.entries(response)) {
    if (Array.isArray(value) && value.some(isObject)) {
      tables.push(grid(value.filter(isObject)));
    } else if (Array.isArray(value) && value.length === 0 && RECORD_LISTS.includes(key)) {
      tables.push(`(no ${key})`);
    } else if (isObject(value)) {
      for (const [inner, innerValue] of Object.entries(value)) lines.push([inner, cell(innerValue)]);
    } else {
      lines.push([key, cell(value)]);
    }
  }
  const width = Math.max(0, ...lines.map(([name]) => name.length));
  const fields = lines.map(([name, value]) => `${`${name}:`.padEnd(width + 1)} ${value}`);
  return [...tables, ...(fields.length > 0 ? [fields.join("\n")] : [])].join("\n\n") + "\n";
}

/** The responses' lists of records: an empty one says so instead of showing nothing. */
const RECORD_LISTS = ["tmcs", "apiUsers", "events", "issuers", "resourceServers"];

/** Columns in the order the first rows name them; each as wide as its widest cell. */
function grid(rows: ReadonlyArray<Record<string, unknown>>): string {
  const columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  const cells = rows.map((row) => columns.map((column) => cell(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(columns), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}

function cell(value: unknown): string {
  if (value === undefined || value === null || value === "") return "-";
  if (Array.isArray(value)) return value.length === 0 ? "-" : value.map(cell).join(", ");
  if (isObject(value)) {
    const entries = Object.entries(value);
    return entries.length === 0 ? "-" : entries.map(([k, v]) => `${k}=${cell(v)}`).join(" ");
  }
  // What is left is a JSON leaf. No control characters reach the terminal, whatever a field holds.
  // eslint-disable-next-line no-control-regex
  return String(value as string | number | boolean).replace(/[\u0000-\u001F\u007F]/g, "?");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
