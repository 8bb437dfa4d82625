// "Your requests": the signed-in user's own calls that became jobs (GET /jobs, requester = you): those still
// waiting for a person or running, with a Withdraw button, then the last few that ended and how. Refreshed
// every few seconds.

import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, cancelJob, errorText, FINAL_STATES, type JobView, listJobs } from "../api";
import { visibleText } from "../format";

const RECENT = 5; // ended requests still shown

function when(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString();
}

function ended(job: JobView): string {
  const by = job.decided_by ? ` by ${job.decided_by}` : "";
  // A reason is another person's words: written out as `toolrun call` prints it (no bidi override turns it around).
  const why = visibleText(job.reason ? `: ${job.reason}` : job.error ? ` (${job.error})` : "");
  return `${job.status.replace("_", " ")}${by}${why}`;
}

export function MyRequests({ username, epoch }: { username: string; epoch: number }) {
  const [jobs, setJobs] = useState<JobView[]>([]);
  const [problem, setProblem] = useState("");
  const refresh = useCallback(async () => {
    try {
      setJobs((await listJobs()).filter((j) => j.requester === username));
    } catch {
      setJobs([]);
    }
  }, [username]);
  useEffect(() => {
    void refresh();
    const timer = window.setInterval(() => void refresh(), 3000);
    return () => window.clearInterval(timer);
  }, [refresh, epoch]);
  const open = jobs.filter((j) => !FINAL_STATES.includes(j.status));
  const done = jobs.filter((j) => FINAL_STATES.includes(j.status)).slice(0, RECENT);
  if (open.length === 0 && done.length === 0) return null;
  const withdraw = async (job: JobView) => {
    setProblem("");
    try {
      await cancelJob(job.job, "withdrawn by the requester");
    } catch (error) {
      setProblem(error instanceof ApiError ? errorText(error.body) || error.message : String(error));
    }
    void refresh();
  };
  return (
    <section class="approvals" aria-label="Your requests" data-testid="my-requests">
      <h2>Your requests</h2>
      {problem && (
        <p class="notice notice-warn" role="alert">
          {problem}
        </p>
      )}
      <ul class="approval-list">
        {open.map((job) => (
          <li class="approval" key={job.job} data-testid="my-request" data-job={job.job} data-status={job.status}>
            <p>
              <strong>{job.tool}</strong>, asked on {when(job.created)}:{" "}
              {job.status === "awaiting_approval" ? `waiting for ${job.approvers.join(", ")}` : "running"}
            </p>
            <div class="actions">
              <button type="button" class="btn" onClick={() => void withdraw(job)}>
                Withdraw<span class="sr-only"> the request to run {job.tool}</span>
              </button>
            </div>
          </li>
        ))}
        {done.map((job) => (
          <li class="approval" key={job.job} data-testid="my-request" data-job={job.job} data-status={job.status}>
            <p>
              <strong>{job.tool}</strong>, asked on {when(job.created)}: {ended(job)}
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}
