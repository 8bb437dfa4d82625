// The approvals view: the calls waiting for the signed-in user's decision (GET /jobs), each with
// who asked and when, the tool, the parameters (secrets masked) and the exact command that will run;
// approve or deny with a reason. Shown on the home pane to approvers; refreshed every few seconds.

import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, decideJob, errorText, FINAL_STATES, getJob, type JobView, listJobs } from "../api";
import { visibleText } from "../format";

function when(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString();
}

/** Follow an approved job to its end: the sentence that says how it ended. */
async function outcomeOf(view: JobView): Promise<string> {
  let current = view;
  for (let i = 0; i < 600 && !FINAL_STATES.includes(current.status); i++) {
    await new Promise((resolve) => window.setTimeout(resolve, 1000));
    current = await getJob(view.job);
  }
  const head = `Job ${current.job} (${current.tool}): approved`;
  const code = current.result?.exit_code;
  switch (current.status) {
    case "succeeded":
      return `${head}; it ran and succeeded.`;
    case "failed":
      return `${head}; it ran and failed${code !== null && code !== undefined ? ` (exit code ${code})` : ""}.`;
    case "timed_out":
      return `${head}; it ran and timed out.`;
    case "cancelled":
      return `${head}; it was cancelled while it ran.`;
    default:
      return `${head}; it is still ${current.status.replace("_", " ")}.`;
  }
}

function Pending({ job, onDone }: { job: JobView; onDone: (message: string) => void }) {
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState("");
  const act = async (action: "approve" | "deny") => {
    setBusy(true);
    setProblem("");
    try {
      const view = await decideJob(job.job, action, reason.trim());
      if (action === "deny") {
        onDone(`Job ${view.job} (${view.tool}): denied.`);
        return;
      }
      onDone(`Job ${view.job} (${view.tool}): approved, running…`);
      onDone(await outcomeOf(view));
    } catch (error) {
      setProblem(error instanceof ApiError ? errorText(error.body) || error.message : String(error));
    } finally {
      setBusy(false);
    }
  };
  // Written out as `toolrun jobs show` does: a requester's bidi override must not turn the command around.
  const command = visibleText(job.plan?.command ?? job.plan?.fn ?? job.plan?.error ?? "");
  const field = `reason-${job.job}`;
  return (
    <li class="approval" data-testid="approval" data-job={job.job}>
      <p>
        <strong>{job.tool}</strong> asked by <strong>{job.requester ?? "an anonymous caller"}</strong> on{" "}
        {when(job.created)}
        {job.expires_at ? `; expires ${when(job.expires_at)}` : ""}
      </p>
      <p class="muted">Parameters</p>
      <pre class="output" data-testid="approval-args">
        {visibleText(JSON.stringify(job.args, null, 2))}
      </pre>
      <p class="muted">The command that will run (secrets masked)</p>
      <pre class="output" data-testid="approval-command">
        {command}
      </pre>
      <label for={field}>Reason</label>
      <input
        id={field}
        class="input"
        type="text"
        value={reason}
        maxLength={1000}
        onInput={(event) => setReason((event.target as HTMLInputElement).value)}
      />
      <div class="actions">
        <button type="button" class="btn btn-primary" disabled={busy} onClick={() => void act("approve")}>
          Approve
        </button>
        <button type="button" class="btn" disabled={busy} onClick={() => void act("deny")}>
          Deny
        </button>
      </div>
      {problem && (
        <p class="notice notice-warn" role="alert">
          {problem}
        </p>
      )}
    </li>
  );
}

export function Approvals({ epoch }: { epoch: number }) {
  const [jobs, setJobs] = useState<JobView[]>([]);
  const [message, setMessage] = useState("");
  const refresh = useCallback(async () => {
    try {
      const pending = await listJobs("awaiting_approval");
      setJobs(pending.filter((j) => j.can_decide));
    } catch {
      setJobs([]);
    }
  }, []);
  useEffect(() => {
    void refresh();
    const timer = window.setInterval(() => void refresh(), 3000);
    return () => window.clearInterval(timer);
  }, [refresh, epoch]);
  if (jobs.length === 0 && !message) return null;
  return (
    <section class="approvals" id="approvals" aria-label="Approvals" data-testid="approvals">
      <h2>Waiting for your approval</h2>
      {message && (
        <p role="status" data-testid="approval-message">
          {message}
        </p>
      )}
      <ul class="approval-list">
        {jobs.map((job) => (
          <Pending
            key={job.job}
            job={job}
            onDone={(text) => {
              setMessage(text);
              void refresh();
            }}
          />
        ))}
      </ul>
    </section>
  );
}
