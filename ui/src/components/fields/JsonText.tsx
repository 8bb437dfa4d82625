// The JSON-mode editor of a list or dict param: a textarea sized to its content.

import type { Param } from "../../api";
import { ariaProps } from "./types";

interface Props {
  id: string;
  param: Param;
  text: string;
  invalid: boolean;
  describedBy: string | undefined;
  onText: (text: string) => void;
}

export function JsonText({ id, param, text, invalid, describedBy, onText }: Props) {
  return (
    <textarea
      id={id}
      class="input textarea mono"
      rows={Math.min(10, Math.max(3, text.split("\n").length))}
      value={text}
      spellcheck={false}
      placeholder={param.type === "list" ? '["item", 2]' : '{"key": "value"}'}
      {...ariaProps(param, invalid, describedBy)}
      onInput={(event) => onText((event.currentTarget as HTMLTextAreaElement).value)}
    />
  );
}
