// "Copy as curl", "Copy as toolrun call" and "Copy link" for the form as it is filled now. The
// copied text is also shown, so it can be read (and selected) where the clipboard is unavailable.

import { useState } from "preact/hooks";
import { currentKey, type Tool } from "../api";
import { copyText } from "../clipboard";
import { curlCommand, toolLink, toolrunCommand } from "../share";
import { CopyIcon } from "./icons";

type Kind = "curl" | "toolrun" | "link";

const LABELS: Record<Kind, string> = {
  curl: "Copy as curl",
  toolrun: "Copy as toolrun call",
  link: "Copy link",
};

interface Props {
  tool: Tool;
  /** The form's arguments now, or null after showing the fields' errors. */
  readArgs: () => Record<string, unknown> | null;
}

export function SharePanel({ tool, readArgs }: Props) {
  const [shown, setShown] = useState<{ kind: Kind; text: string; copied: boolean } | null>(null);

  const share = async (kind: Kind) => {
    const args = readArgs();
    if (args === null) {
      setShown(null);
      return;
    }
    const origin = window.location.origin;
    const text =
      kind === "curl"
        ? curlCommand(origin, tool.key, tool.params, args, currentKey() !== "")
        : kind === "toolrun"
          ? toolrunCommand(origin, tool.key, tool.params, args)
          : toolLink(origin, tool.key, tool.params, args);
    setShown({ kind, text, copied: false });
    const copied = await copyText(text);
    setShown({ kind, text, copied });
  };

  const secrets = tool.params.filter((p) => p.secret).length > 0;
  return (
    <section class="share" aria-label="Share this call">
      <div class="share-buttons">
        {(Object.keys(LABELS) as Kind[]).map((kind) => (
          <button key={kind} type="button" class="btn btn-small btn-ghost" onClick={() => void share(kind)}>
            <CopyIcon size={14} /> {LABELS[kind]}
          </button>
        ))}
      </div>
      {shown && (
        <div class="share-output">
          <p class="muted" role="status">
            {shown.copied ? "Copied to the clipboard:" : "Could not copy; select the text below:"}
          </p>
          <pre class="output" tabIndex={0} data-testid="share-text" data-kind={shown.kind}>
            {shown.text}
          </pre>
          {shown.kind !== "link" && (
            <p class="muted share-note">
              {shown.kind === "curl"
                ? "The API key is read from $TOOLRUN_API_KEY when you run it."
                : "toolrun reads the API key from $TOOLRUN_API_KEY."}
              {secrets && " Secret values are read from $TOOLRUN_SECRET_<NAME>, never written out."}
            </p>
          )}
          {shown.kind === "link" && secrets && <p class="muted share-note">Secret values are left out of links.</p>}
        </div>
      )}
    </section>
  );
}
