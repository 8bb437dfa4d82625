// Badges for the hints a catalog declares about a tool: read-only, destructive, idempotent, and
// open world (it reaches outside this machine). Only hints declared true are shown.

import type { Annotations } from "../api";

const HINTS: { key: keyof Annotations; label: string; title: string; tone: string }[] = [
  { key: "read_only", label: "read-only", title: "Only reads: it changes nothing.", tone: "safe" },
  { key: "destructive", label: "destructive", title: "May change or delete things; asks before it runs.", tone: "danger" },
  { key: "idempotent", label: "idempotent", title: "Running it again with the same arguments changes nothing more.", tone: "plain" },
  { key: "open_world", label: "open world", title: "Reaches systems outside this server.", tone: "plain" },
];

interface Props {
  annotations: Annotations | undefined;
  small?: boolean;
  approvers?: string[]; // the tool needs approval by a member of these groups
  runsAsJob?: boolean; // every call answers at once with a job
}

export function ToolHints({ annotations, small, approvers, runsAsJob }: Props) {
  const shown = HINTS.filter((hint) => annotations?.[hint.key] === true);
  if (shown.length === 0 && !approvers && !runsAsJob) return null;
  return (
    <ul class={`hints${small ? " hints-small" : ""}`} aria-label="Hints">
      {approvers && (
        <li
          class="hint hint-danger"
          title={`Each call waits until a member of ${approvers.join(", ")} approves it.`}
          data-hint="approval"
        >
          needs approval: {approvers.join(", ")}
        </li>
      )}
      {runsAsJob && (
        <li class="hint hint-plain" title="A call answers at once; the result comes later." data-hint="async">
          runs as a job
        </li>
      )}
      {shown.map((hint) => (
        <li key={hint.key} class={`hint hint-${hint.tone}`} title={hint.title} data-hint={hint.key}>
          {hint.label}
        </li>
      ))}
    </ul>
  );
}
