// `str` params, and any type this UI does not know (sent as JSON when the text parses as JSON).

import { parseLoose, scalarText } from "../../format";
import { ariaProps, type FieldKind, type FieldProps } from "./types";

export interface TextState {
  text: string;
}

function TextInput({ id, param, state, invalid, describedBy, placeholder, onChange }: FieldProps<TextState>) {
  return (
    <input
      id={id}
      class="input"
      type="text"
      value={state.text}
      placeholder={placeholder}
      autocomplete="off"
      spellcheck={false}
      {...ariaProps(param, invalid, describedBy)}
      onInput={(event) => onChange({ text: (event.currentTarget as HTMLInputElement).value })}
    />
  );
}

export const textKind: FieldKind<TextState> = {
  init: (param) => ({ text: scalarText(param.default) }),
  read: (param, state) => {
    if (param.type === "str") return state.text === "" ? null : { value: state.text };
    return state.text.trim() === "" ? null : { value: parseLoose(state.text) };
  },
  Input: TextInput,
  labelFor: () => true,
};
