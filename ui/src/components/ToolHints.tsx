// Badges for the hints a catalog declares about a tool: read-only, destructive, idempotent, and
// open world (it reaches outside this machine). Only hints declared true are shown.

import type { Annotations } from "../api";

const HINTS: { key: keyof Annotations; label: string; title: string; tone: string }[] = [
  { key: "read_only", label: "read-only", title: "Only reads: it changes nothing.", tone: "safe" },
  { key: "destructive", label: "destructive", title: "May change or delete things; asks before it runs.", tone: "danger" },
  { key: "idempotent", label: "idempotent", title: "Running it again with the same arguments changes nothing more.", tone: "plain" },
  { key: "open_world", label: "open world", title: "Reaches systems outside this server.", tone: "plain" },
];

export function ToolHints({ annotations, small }: { annotations: Annotations | undefined; small?: boolean }) {
  const shown = HINTS.filter((hint) => annotations?.[hint.key] === true);
  if (shown.length === 0) return null;
  return (
    <ul class={`hints${small ? " hints-small" : ""}`} aria-label="Hints">
      {shown.map((hint) => (
        <li key={hint.key} class={`hint hint-${hint.tone}`} title={hint.title} data-hint={hint.key}>
          {hint.label}
        </li>
      ))}
    </ul>
  );
}
