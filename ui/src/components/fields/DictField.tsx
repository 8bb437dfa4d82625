// `dict` params: key/value rows, or a JSON object in JSON mode. Empty rows are ignored; a value
// without a key or a key given twice is refused before sending.

import { parseLoose, showLoose } from "../../format";
import { KeyValueEditor, newRow, type Row } from "../KeyValueEditor";
import { JsonText } from "./JsonText";
import { type FieldKind, type FieldProps, isEmptyValue, isPlainObject, type Read, readJsonText } from "./types";

export interface DictState {
  rows: Row[];
  json: string;
}

function rowsOf(value: unknown): Row[] {
  const rows = isPlainObject(value) ? Object.entries(value).map(([k, v]) => newRow(k, showLoose(v))) : [];
  return rows.length ? rows : [newRow()];
}

function readRows(rows: Row[]): { value: Record<string, unknown> } | { error: string } {
  const result: Record<string, unknown> = {};
  for (const row of rows) {
    if (row.key === "" && row.value.trim() === "") continue;
    if (row.key === "") return { error: `An entry with value ${JSON.stringify(row.value)} has no key.` };
    if (Object.hasOwn(result, row.key)) return { error: `The key ${JSON.stringify(row.key)} appears twice.` };
    result[row.key] = parseLoose(row.value);
  }
  return { value: result };
}

function DictInput(props: FieldProps<DictState>) {
  const { id, param, state, json, invalid, describedBy, onChange } = props;
  if (json) {
    const onText = (text: string) => onChange({ ...state, json: text });
    return <JsonText id={id} param={param} text={state.json} invalid={invalid} describedBy={describedBy} onText={onText} />;
  }
  return (
    <KeyValueEditor
      id={id}
      name={param.name}
      rows={state.rows}
      describedBy={describedBy}
      invalid={invalid}
      onChange={(rows) => onChange({ ...state, rows })}
    />
  );
}

export const dictKind: FieldKind<DictState> = {
  init: (param) => ({ rows: rowsOf(param.default), json: "" }),
  read: (param, state, json): Read => {
    if (json) return readJsonText(state.json);
    const read = readRows(state.rows);
    if ("error" in read) return read;
    return isEmptyValue(read.value) && isEmptyValue(param.default) ? null : read;
  },
  Input: DictInput,
  labelFor: (json) => json,
  json: {
    toJson: (param, state) => {
      const read = readRows(state.rows);
      if ("error" in read) return { state: { ...state, json: "" }, error: read.error };
      const empty = isEmptyValue(read.value) && isEmptyValue(param.default);
      return { state: { ...state, json: empty ? "" : JSON.stringify(read.value, null, 2) } };
    },
    fromJson: (_param, state) => {
      const read = readJsonText(state.json) ?? { value: {} };
      if ("error" in read) return { state, error: "Not valid JSON: fix it to switch back to the editor." };
      if (!isPlainObject(read.value)) return { state, error: "Must be a JSON object to edit as rows." };
      return { state: { ...state, rows: rowsOf(read.value) } };
    },
    settle: (state) => state,
  },
};
