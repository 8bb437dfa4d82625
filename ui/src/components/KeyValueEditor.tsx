// A key/value row editor for `dict` params: one row per entry, each with labelled inputs and a
// remove button, and an "Add entry" button.

import { PlusIcon, XIcon } from "./icons";

export interface Row {
  id: number;
  key: string;
  value: string;
}

let nextRowId = 1;
export function newRow(key = "", value = ""): Row {
  return { id: nextRowId++, key, value };
}

interface Props {
  id: string;
  name: string;
  rows: Row[];
  describedBy?: string;
  invalid?: boolean;
  onChange: (rows: Row[]) => void;
}

export function KeyValueEditor({ id, name, rows, describedBy, invalid, onChange }: Props) {
  const update = (rowId: number, patch: Partial<Row>) =>
    onChange(rows.map((row) => (row.id === rowId ? { ...row, ...patch } : row)));

  const add = () => {
    const row = newRow();
    onChange([...rows, row]);
    window.requestAnimationFrame(() => document.getElementById(`${id}-key-${row.id}`)?.focus());
  };

  const remove = (index: number) => {
    const next = rows.filter((_, i) => i !== index);
    onChange(next);
    const focus = next[Math.min(index, next.length - 1)];
    window.requestAnimationFrame(() =>
      (focus ? document.getElementById(`${id}-key-${focus.id}`) : document.getElementById(`${id}-add`))?.focus(),
    );
  };

  return (
    <div
      class={`kv-editor${invalid ? " is-invalid" : ""}`}
      role="group"
      aria-labelledby={`${id}-label`}
      aria-describedby={describedBy}
    >
      {rows.length > 0 && (
        <div class="kv-head" aria-hidden="true">
          <span>Key</span>
          <span>Value</span>
        </div>
      )}
      {rows.map((row, index) => (
        <div class="kv-row" key={row.id}>
          <label class="sr-only" for={`${id}-key-${row.id}`}>
            {`${name}: key ${index + 1}`}
          </label>
          <input
            id={`${id}-key-${row.id}`}
            class="input mono"
            type="text"
            autocomplete="off"
            spellcheck={false}
            placeholder="key"
            value={row.key}
            onInput={(event) => update(row.id, { key: (event.currentTarget as HTMLInputElement).value })}
          />
          <label class="sr-only" for={`${id}-value-${row.id}`}>
            {`${name}: value ${index + 1}`}
          </label>
          <input
            id={`${id}-value-${row.id}`}
            class="input mono"
            type="text"
            autocomplete="off"
            spellcheck={false}
            placeholder="value"
            value={row.value}
            onInput={(event) => update(row.id, { value: (event.currentTarget as HTMLInputElement).value })}
          />
          <button
            type="button"
            class="btn btn-icon btn-ghost"
            aria-label={`Remove entry ${index + 1}${row.key ? ` (${row.key})` : ""}`}
            title="Remove entry"
            onClick={() => remove(index)}
          >
            <XIcon />
          </button>
        </div>
      ))}
      <button type="button" id={`${id}-add`} class="btn btn-small btn-ghost kv-add" onClick={add}>
        <PlusIcon size={14} /> Add entry
      </button>
    </div>
  );
}
