// A typed output's value (`output:` json or lines): a list of flat objects (or of scalars) as a table,
// anything else as a tree of nested lists. Every value is rendered as text (never as HTML).

type Row = Record<string, unknown>;

function isRow(value: unknown): value is Row {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isScalar(value: unknown): boolean {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

/** The columns of a table for `value`, or null when it is not a list of flat objects or of scalars. */
export function tableColumns(value: unknown): string[] | null {
  if (!Array.isArray(value) || value.length === 0) return null;
  if (value.every(isScalar)) return [];
  if (!value.every((row) => isRow(row) && Object.values(row).every(isScalar))) return null;
  const columns: string[] = [];
  for (const row of value as Row[]) {
    for (const name of Object.keys(row)) if (!columns.includes(name)) columns.push(name);
  }
  return columns;
}

function scalarText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function Table({ rows, columns }: { rows: unknown[]; columns: string[] }) {
  return (
    <div class="data-table-wrap">
      <table class="data-table" data-testid="result-table">
        <thead>
          <tr>
            <th scope="col">#</th>
            {columns.length === 0 ? <th scope="col">value</th> : columns.map((name) => <th scope="col">{name}</th>)}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr>
              <td>{i}</td>
              {columns.length === 0 ? (
                <td>{scalarText(row)}</td>
              ) : (
                columns.map((name) => <td>{(row as Row)[name] === undefined ? "" : scalarText((row as Row)[name])}</td>)
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Tree({ value, name }: { value: unknown; name?: string }) {
  const label = name === undefined ? null : <span class="data-key">{name}: </span>;
  if (isScalar(value)) {
    return (
      <li>
        {label}
        <span class={`data-${value === null ? "null" : typeof value}`}>{scalarText(value)}</span>
      </li>
    );
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((item, i) => [String(i), item])
    : Object.entries(value as Row);
  const kind = Array.isArray(value) ? `list of ${entries.length}` : `object of ${entries.length}`;
  return (
    <li>
      <details open>
        <summary>
          {label}
          <span class="data-kind">{kind}</span>
        </summary>
        <ul class="data-tree">
          {entries.map(([key, item]) => (
            <Tree value={item} name={key} />
          ))}
        </ul>
      </details>
    </li>
  );
}

export function DataView({ value }: { value: unknown }) {
  const columns = tableColumns(value);
  if (columns !== null) return <Table rows={value as unknown[]} columns={columns} />;
  return (
    <ul class="data-tree data-root" data-testid="result-tree">
      <Tree value={value} />
    </ul>
  );
}
