// A tag-chip input for `list` params: Enter or a comma adds the typed item, Backspace in an empty
// box removes the last chip, each chip has its own remove button.

import { useRef } from "preact/hooks";
import { XIcon } from "./icons";

interface Props {
  id: string;
  chips: string[];
  draft: string;
  describedBy?: string;
  invalid?: boolean;
  required?: boolean;
  placeholder?: string;
  onChange: (chips: string[], draft: string) => void;
}

export function ChipInput({ id, chips, draft, describedBy, invalid, required, placeholder, onChange }: Props) {
  const input = useRef<HTMLInputElement>(null);

  const commit = () => {
    if (draft.trim() === "") return;
    onChange([...chips, draft.trim()], "");
  };

  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Enter" || (event.key === "," && !event.isComposing)) {
      if (draft.trim() !== "") {
        event.preventDefault();
        commit();
      } else if (event.key === ",") {
        event.preventDefault();
      } else {
        // Enter in an empty chip box must not submit the form by surprise.
        event.preventDefault();
      }
    } else if (event.key === "Backspace" && draft === "" && chips.length > 0) {
      event.preventDefault();
      onChange(chips.slice(0, -1), "");
    }
  };

  const remove = (index: number) => {
    onChange(
      chips.filter((_, i) => i !== index),
      draft,
    );
    input.current?.focus();
  };

  return (
    <div
      class={`chip-input${invalid ? " is-invalid" : ""}`}
      onClick={(event) => {
        if (event.target === event.currentTarget) input.current?.focus();
      }}
    >
      <ul class="chip-list" aria-label="Items">
        {chips.map((chip, index) => (
          <li class="chip chip-removable" key={`${index}:${chip}`}>
            <span class="chip-text">{chip}</span>
            <button
              type="button"
              class="chip-remove"
              aria-label={`Remove ${chip}`}
              title={`Remove ${chip}`}
              onClick={() => remove(index)}
            >
              <XIcon size={12} />
            </button>
          </li>
        ))}
      </ul>
      <input
        id={id}
        ref={input}
        class="chip-draft"
        type="text"
        autocomplete="off"
        spellcheck={false}
        value={draft}
        placeholder={chips.length === 0 ? placeholder : "Add another…"}
        aria-describedby={describedBy}
        aria-invalid={invalid ? "true" : undefined}
        aria-required={required ? "true" : undefined}
        onInput={(event) => onChange(chips, (event.currentTarget as HTMLInputElement).value)}
        onKeyDown={onKeyDown}
        onBlur={commit}
      />
    </div>
  );
}
