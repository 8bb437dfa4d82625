// `str` params, and any type this UI does not know (sent as JSON when the text parses as JSON).
// A `secret` param is a password field; `pattern` and `min`/`max` (lengths) become the input's
// pattern, minlength and maxlength (the form is noValidate: they mark the field; the server,
// matching the pattern with RE2, decides).

import { parseLoose, scalarText } from "../../format";
import { ariaProps, type FieldKind, type FieldProps } from "./types";

export interface TextState {
  text: string;
}

function TextInput({ id, param, state, invalid, describedBy, placeholder, onChange }: FieldProps<TextState>) {
  const common = {
    id,
    value: state.text,
    autocomplete: "off",
    spellcheck: false,
    pattern: param.pattern,
    minLength: param.type === "str" ? param.min : undefined,
    maxLength: param.type === "str" ? param.max : undefined,
    ...ariaProps(param, invalid, describedBy),
    onInput: (event: Event) => onChange({ text: (event.currentTarget as HTMLInputElement).value }),
  };
  if (param.secret) return <input {...common} class="input mono" type="password" />;
  return <input {...common} class="input" type="text" placeholder={placeholder} />;
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
