// A tool's detail: key, groups, the description rendered as (sanitized) markdown, the example
// call verbatim, then the call form.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { getTool, type Tool, type ToolSandbox } from "../api";
import { describeProblem, type Problem } from "../errors";
import { renderMarkdown } from "../markdown";
import { CallForm } from "./CallForm";
import { ToolHints } from "./ToolHints";
import { ArrowLeftIcon } from "./icons";

const EXEC_RETURN_TYPE = "str | (int, str, str)";

/** A return type in words, as `toolrun describe` says it ("" when the type says it all). */
export function returnWords(returnType: string, output?: Tool["output"]): string {
  if (output) {
    const what =
      output.format === "lines"
        ? "The lines of the command's standard output, as a list of strings"
        : output.schema
          ? "The command's standard output parsed as JSON and checked against the tool's output schema"
          : "The command's standard output parsed as JSON";
    return (
      `${what}, when it exits with code 0 (output that does not parse or match fails the call, the raw text ` +
      "kept); otherwise the tuple (exit code, stdout, stderr). Here the value shows as a table or a tree."
    );
  }
  if (returnType === EXEC_RETURN_TYPE) {
    return (
      "The command's standard output when it exits with code 0; otherwise the tuple (exit code, stdout, " +
      "stderr), where exit code -1 means the timeout stopped it. Here a failure shows its exit code, " +
      "stdout and stderr apart."
    );
  }
  return returnType === "unknown" ? "The function declares no return type." : "";
}

interface Props {
  toolKey: string;
  epoch: number;
  backHref: string;
  onBack: (event: MouseEvent) => void;
}

export function ToolDetail({ toolKey, epoch, backHref, onBack }: Props) {
  const [tool, setTool] = useState<Tool | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [loading, setLoading] = useState(true);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    const abort = new AbortController();
    setLoading(true);
    setProblem(null);
    getTool(toolKey, abort.signal)
      .then((found) => {
        setTool(found);
        setLoading(false);
      })
      .catch((error: unknown) => {
        if (error instanceof DOMException && error.name === "AbortError") return;
        setTool(null);
        setProblem(describeProblem(error, "load"));
        setLoading(false);
      });
    return () => abort.abort();
  }, [toolKey, epoch]);

  // Move focus to the heading when a tool is opened (not when the same tool reloads).
  const focused = useRef<string | null>(null);
  useEffect(() => {
    if (loading || focused.current === toolKey) return;
    focused.current = toolKey;
    heading.current?.focus({ preventScroll: true });
    heading.current?.scrollIntoView({ block: "nearest" });
  }, [loading, toolKey]);

  const description = useMemo(() => (tool ? renderMarkdown(tool.description) : ""), [tool]);

  const back = (
    <a class="back-link" href={backHref} onClick={onBack}>
      <ArrowLeftIcon size={14} /> All tools
    </a>
  );

  if (loading && !tool) {
    return (
      <article class="panel detail" aria-busy="true" aria-label="Loading tool">
        {back}
        <div class="skeleton skeleton-title" />
        <div class="skeleton skeleton-line" />
        <div class="skeleton skeleton-line short" />
      </article>
    );
  }

  if (problem || !tool) {
    return (
      <article class="panel detail" aria-labelledby="detail-heading">
        {back}
        <h2 id="detail-heading" class="detail-key" tabIndex={-1} ref={heading}>
          {toolKey}
        </h2>
        <div class="notice notice-error" role="alert">
          <strong>{problem?.title ?? "Not found"}</strong>
          {problem?.detail && <span> {problem.detail}</span>}
        </div>
      </article>
    );
  }

  return (
    <article class="panel detail" aria-labelledby="detail-heading" data-testid="detail" aria-busy={loading}>
      {back}
      <header class="detail-head">
        <h2 id="detail-heading" class="detail-key" tabIndex={-1} ref={heading}>
          {tool.key}
        </h2>
        {tool.annotations?.title && (
          <p class="detail-title" data-testid="tool-title">
            {tool.annotations.title}
          </p>
        )}
        <ToolHints
          annotations={tool.annotations}
          approvers={tool.approval?.required ? tool.approval.approvers : undefined}
          runsAsJob={tool.async === true}
        />
        <ul class="chips" aria-label="Groups">
          {tool.groups.map((group) => (
            <li class="chip" key={group}>
              {group}
            </li>
          ))}
        </ul>
      </header>
      {tool.description.trim() ? (
        // Sanitized by DOMPurify in renderMarkdown.
        <div class="prose" data-testid="description" dangerouslySetInnerHTML={{ __html: description }} />
      ) : (
        <p class="muted">No description.</p>
      )}
      <dl class="facts">
        <div>
          <dt>Example</dt>
          <dd>
            <pre class="example" data-testid="example">
              <code>{tool.example}</code>
            </pre>
          </dd>
        </div>
        <div>
          <dt>Returns</dt>
          <dd>
            <code class="return-type">{tool.return_type}</code>
            {returnWords(tool.return_type, tool.output) && (
              <p class="return-words" data-testid="return-words">
                {returnWords(tool.return_type, tool.output)}
              </p>
            )}
          </dd>
        </div>
        {tool.sandbox && (
          <div>
            <dt>Sandbox</dt>
            <dd data-testid="sandbox">
              {sandboxText(tool.sandbox)}
              {!tool.sandbox.enforced && (
                <p class="field-error" role="note">
                  Not enforceable on this server, so calls fail: {tool.sandbox.reason}
                </p>
              )}
            </dd>
          </div>
        )}
      </dl>
      <CallForm key={tool.key} tool={tool} />
    </article>
  );
}

/** `default: no network; writes /srv/out; reads /opt` */
function sandboxText(box: ToolSandbox): string {
  const parts = [box.network === "host" ? "host network" : "no network"];
  if (box.writable.length) parts.push(`writes ${box.writable.join(", ")}`);
  if (box.readable.length) parts.push(`reads ${box.readable.join(", ")}`);
  return `${box.profile}: ${parts.join("; ")}`;
}
