// `list` params: tag chips (Enter or a comma adds the typed item), or a JSON array in JSON mode.

import { parseLoose, showLoose } from "../../format";
import { ChipInput } from "../ChipInput";
import { JsonText } from "./JsonText";
import { type FieldKind, type FieldProps, isEmptyValue, readJsonText } from "./types";

export interface ListState {
  chips: string[];
  draft: string;
  json: string;
}

function items(state: ListState): string[] {
  const draft = state.draft.trim();
  return draft ? [...state.chips, draft] : state.chips;
}

function ListInput(props: FieldProps<ListState>) {
  const { id, param, state, json, invalid, describedBy, placeholder, onChange } = props;
  if (json) {
    const onText = (text: string) => onChange({ ...state, json: text });
    return <JsonText id={id} param={param} text={state.json} invalid={invalid} describedBy={describedBy} onText={onText} />;
  }
  return (
    <ChipInput
      id={id}
      chips={state.chips}
      draft={state.draft}
      required={param.required}
      describedBy={describedBy}
      invalid={invalid}
      placeholder={placeholder || "Type an item, press Enter"}
      onChange={(chips, draft) => onChange({ ...state, chips, draft })}
    />
  );
}

export const listKind: FieldKind<ListState> = {
  init: (param) => ({ chips: Array.isArray(param.default) ? param.default.map(showLoose) : [], draft: "", json: "" }),
  read: (param, state, json) => {
    if (json) return readJsonText(state.json);
    const value = items(state).map(parseLoose);
    return isEmptyValue(value) && isEmptyValue(param.default) ? null : { value };
  },
  Input: ListInput,
  labelFor: () => true,
  hint: "Enter or comma adds an item.",
  json: {
    toJson: (param, state) => {
      const value = items(state).map(parseLoose);
      const empty = isEmptyValue(value) && isEmptyValue(param.default);
      return { state: { chips: items(state), draft: "", json: empty ? "" : JSON.stringify(value, null, 2) } };
    },
    fromJson: (_param, state) => {
      const read = readJsonText(state.json) ?? { value: [] };
      if ("error" in read) return { state, error: "Not valid JSON: fix it to switch back to the editor." };
      if (!Array.isArray(read.value)) return { state, error: "Must be a JSON array to edit as chips." };
      return { state: { ...state, chips: read.value.map(showLoose), draft: "" } };
    },
    settle: (state) => (state.draft.trim() ? { ...state, chips: items(state), draft: "" } : state),
  },
};
