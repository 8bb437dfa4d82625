// The thin client over the toolrun HTTP API (spec 4, 5, 7). Same origin only; the API key
// travels in the X-API-Key header and never in a URL.

export const PAGE_SIZE = 10;
const KEY_STORAGE = "toolrun.apiKey";

export type ParamType = "str" | "int" | "float" | "bool" | "list" | "dict";

export interface Param {
  name: string;
  type: ParamType | string;
  required: boolean;
  default: unknown;
  description: string;
  example: unknown;
  // Constraints, present only when the catalog declares them.
  enum?: unknown[];
  /** The whole value must match (a Python regular expression). */
  pattern?: string;
  /** int/float: the smallest / largest value; str, list, dict: the shortest / longest length. */
  min?: number;
  max?: number;
  /** Never echoed, logged or put in a link: the UI renders a password field. */
  secret?: boolean;
}

/** The hints a catalog declares about a tool (only the declared ones are present). */
export interface Annotations {
  title?: string;
  read_only?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  open_world?: boolean;
}

/** The sandbox an exec or curl tool runs in, and whether the server can enforce it (calls fail when not). */
export interface ToolSandbox {
  profile: string;
  network: "none" | "host" | string;
  readable: string[];
  writable: string[];
  tmp_size?: number;
  enforced: boolean;
  reason?: string;
}

export interface Tool {
  key: string;
  groups: string[];
  params: Param[];
  return_type: string;
  description: string;
  example: string;
  annotations?: Annotations;
  keywords?: string[];
  sandbox?: ToolSandbox;
  approval?: { required: boolean; approvers: string[] };
  async?: boolean;
  /** GET /search only: how well the tool matches the query, 0 to 1 (docs/mcp.md). */
  score?: number;
  /** A typed output (`output:` of an exec or curl tool): the value it answers, and its JSON Schema. */
  output?: { format: "json" | "lines"; schema?: Record<string, unknown> };
}

export interface Identity {
  username: string;
  email: string;
  groups: string[];
  tools: string[];
}

export interface Page {
  source: "tools" | "search";
  query: string;
  items: Tool[];
  total: number;
  offset: number;
  limit: number;
  has_more: boolean;
  next_offset: number | null;
}

/** A non-2xx answer (or no answer at all: status 0), with the body as the server sent it. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: string;
  readonly retryAfter: number | null;

  constructor(status: number, body: string, retryAfter: number | null, message?: string) {
    super(message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

// -- the stored key ------------------------------------------------------------------------------

export function storedKey(): string {
  try {
    return window.localStorage.getItem(KEY_STORAGE) ?? "";
  } catch {
    return "";
  }
}

export function storeKey(key: string): void {
  try {
    if (key) window.localStorage.setItem(KEY_STORAGE, key);
    else window.localStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage disabled: the key lives for this page only */
  }
  memoryKey = key;
}

export const KEY_STORAGE_NAME = KEY_STORAGE;

let memoryKey = storedKey();

export function currentKey(): string {
  return memoryKey;
}

export function setCurrentKey(key: string): void {
  memoryKey = key;
}

// -- requests ------------------------------------------------------------------------------------

function retryAfterOf(response: Response, body: string): number | null {
  const header = response.headers.get("Retry-After");
  if (header && /^\d+$/.test(header.trim())) return Number(header.trim());
  const match = /retry after (\d+)/i.exec(body) ?? /(\d+)\s*s(?:econds?)?\b/i.exec(body);
  return match ? Number(match[1]) : null;
}

async function request(
  path: string,
  init: { method?: string; body?: string; key?: string; signal?: AbortSignal; accept?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { Accept: init.accept ?? "application/json, text/plain;q=0.9, */*;q=0.5" };
  const key = init.key ?? memoryKey;
  if (key) headers["X-API-Key"] = key;
  if (init.body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(path, {
      method: init.method ?? "GET",
      headers,
      body: init.body,
      signal: init.signal,
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "", null, "Could not reach the server. Is `toolrun serve` still running?");
  }
  if (!response.ok) {
    const body = await response.text();
    throw new ApiError(response.status, body, retryAfterOf(response, body));
  }
  return response;
}

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

function headerInt(response: Response, name: string): number | null {
  const value = response.headers.get(name);
  return value !== null && /^\d+$/.test(value.trim()) ? Number(value.trim()) : null;
}

/**
 * The empty search box: GET /tools, a page at a time. The request carries `offset` and `limit`;
 * a server that pages /tools answers with that slice and `X-Total-Count` / `X-Has-More` /
 * `X-Next-Offset` headers. A server that answers with the whole array is paged here the same way.
 */
export async function listTools(offset: number, signal?: AbortSignal): Promise<Page> {
  const params = new URLSearchParams({ offset: String(offset), limit: String(PAGE_SIZE) });
  const response = await request(`/tools?${params}`, { signal });
  const all = await json<Tool[]>(response);
  const total = headerInt(response, "X-Total-Count");
  if (total !== null) {
    const next = headerInt(response, "X-Next-Offset");
    const hasMore = (response.headers.get("X-Has-More") ?? "").trim().toLowerCase() === "true";
    return {
      source: "tools",
      query: "",
      items: all,
      total,
      offset,
      limit: PAGE_SIZE,
      has_more: hasMore,
      next_offset: hasMore ? next : null,
    };
  }
  const items = all.slice(offset, offset + PAGE_SIZE);
  const hasMore = offset + items.length < all.length;
  return {
    source: "tools",
    query: "",
    items,
    total: all.length,
    offset,
    limit: PAGE_SIZE,
    has_more: hasMore,
    next_offset: hasMore ? offset + items.length : null,
  };
}

/** A typed query: GET /search, paged by the server. */
export async function searchTools(query: string, offset: number, signal?: AbortSignal): Promise<Page> {
  const params = new URLSearchParams({ q: query, offset: String(offset), limit: String(PAGE_SIZE) });
  const body = await json<Omit<Page, "source">>(await request(`/search?${params}`, { signal }));
  return { ...body, source: "search" };
}

export async function getTool(key: string, signal?: AbortSignal): Promise<Tool> {
  return json<Tool>(await request(`/tools/${encodeURIComponent(key)}`, { signal }));
}

export async function whoami(key: string): Promise<Identity> {
  return json<Identity>(await request("/whoami", { key }));
}

/**
 * The structured answer of POST /tools/{key} to `Accept: application/json`: exec and curl tools
 * give returncode, stdout, stderr and timed_out; fn tools give `text`, the plain-text answer.
 */
export interface CallPayload {
  key: string;
  ok: boolean;
  returncode?: number;
  stdout?: string;
  stderr?: string;
  timed_out?: boolean;
  truncated?: boolean;
  bytes_kept?: number;
  bytes_dropped?: number;
  result?: unknown;
  text?: string;
  seconds?: number;
  /** `result` is a typed output's parsed value (the tool's `output:`). */
  typed?: boolean;
}

export interface CallResult {
  status: number;
  payload: CallPayload;
  millis: number;
  /** A failed sandboxed call's `Toolrun-Sandbox` header: the profile it ran in and what that withholds. */
  sandbox?: { profile: string; withholds: string };
}

/** `profile=<name>; withholds=<words>` (each percent-encoded), or undefined when absent or not of that form. */
export function sandboxHeader(value: string | null): { profile: string; withholds: string } | undefined {
  const found = /^profile=([^;]*); withholds=(.*)$/.exec(value ?? "");
  if (!found) return undefined;
  try {
    return { profile: decodeURIComponent(found[1]), withholds: decodeURIComponent(found[2]) };
  } catch {
    return undefined;
  }
}

/** A JSON error answer (`{error, type}`) as the plain-text answer words it: `Type: message`. */
export function errorText(body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return body;
  }
  if (typeof parsed !== "object" || parsed === null) return body;
  const { error, type, output } = parsed as { error?: unknown; type?: unknown; output?: unknown };
  if (typeof error !== "string") return body;
  // With DEBUG on, `error` is the whole traceback, which already names the type.
  const text = typeof type === "string" && !error.includes("\n") ? `${type}: ${error}` : error;
  // A typed output that did not parse or match (OutputInvalid): the text the tool printed follows.
  return typeof output === "string" ? `${text}\n\n${output}` : text;
}

/**
 * POST /tools/{key}, asking for the structured result (the same call, the same status codes): a
 * failed command comes back with its exit code, stdout and stderr apart, and a timeout flagged.
 */
export async function callTool(
  key: string,
  args: Record<string, unknown>,
  signal?: AbortSignal,
  onJob?: (view: JobView) => void,
): Promise<CallResult> {
  const started = performance.now();
  let response: Response;
  try {
    response = await request(`/tools/${encodeURIComponent(key)}`, {
      method: "POST",
      body: JSON.stringify(args),
      signal,
      accept: "application/json",
    });
  } catch (error) {
    if (error instanceof ApiError && error.status !== 0) {
      throw new ApiError(error.status, errorText(error.body), error.retryAfter, error.message);
    }
    throw error;
  }
  const text = await response.text();
  if (response.status === 202) {
    // The call is a job: it waits for an approver, or runs in the background. Follow it to its end.
    const started202 = started;
    const { job } = JSON.parse(text) as { job: string };
    return followJob(job, started202, onJob ?? (() => undefined), signal);
  }
  let payload: CallPayload;
  try {
    payload = JSON.parse(text) as CallPayload;
  } catch {
    payload = { key, ok: true, text }; // not toolrun's JSON (a proxy's answer?): shown as text
  }
  const sandbox = sandboxHeader(response.headers.get("Toolrun-Sandbox"));
  return { status: response.status, payload, millis: performance.now() - started, ...(sandbox ? { sandbox } : {}) };
}

// -- jobs (docs/jobs.md): calls that wait for approval or run in the background -------------------

export const FINAL_STATES = ["succeeded", "failed", "timed_out", "cancelled", "denied", "expired"];

export interface JobView {
  job: string;
  status: string;
  tool: string;
  requester: string | null;
  approvers: string[];
  args: Record<string, unknown>;
  created: number;
  expires_at: number | null;
  decided_by: string | null;
  reason: string | null;
  error: string | null;
  can_decide: boolean;
  updated?: number;
  plan?: { command?: string; fn?: string; error?: string };
  output?: JobOutput | null;
  result?: { status: number; content_type: string; body: string; exit_code: number | null };
}

/** What a job printed: so far while it runs, and once it ended (a cancelled job keeps it). Head and tail of each. */
export interface JobOutput {
  stdout_head: string;
  stdout_tail: string;
  stdout_bytes: number;
  stderr_head: string;
  stderr_tail: string;
  stderr_bytes: number;
}

/** A job that ended without a result (denied, expired, cancelled...): its last view, output included. */
export class JobEnded extends Error {
  constructor(public view: JobView) {
    super(`Job ${view.job} was ${view.status}`);
  }
}

export async function cancelJob(id: string, reason: string): Promise<JobView> {
  const body = JSON.stringify(reason ? { reason } : {});
  return json<JobView>(await request(`/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST", body }));
}

export async function getJob(id: string, signal?: AbortSignal): Promise<JobView> {
  return json<JobView>(await request(`/jobs/${encodeURIComponent(id)}`, { signal }));
}

export async function listJobs(status?: string, signal?: AbortSignal): Promise<JobView[]> {
  const query = status ? `?status=${encodeURIComponent(status)}` : "";
  return json<JobView[]>(await request(`/jobs${query}`, { signal }));
}

export async function decideJob(id: string, action: "approve" | "deny", reason: string): Promise<JobView> {
  const body = JSON.stringify(reason ? { reason } : {});
  return json<JobView>(await request(`/jobs/${encodeURIComponent(id)}/${action}`, { method: "POST", body }));
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = window.setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      window.clearTimeout(timer);
      reject(new DOMException("Aborted", "AbortError"));
    });
  });
}

/** The requester still waits: its hold on the request lasts 10 s more (docs/jobs.md); the job as it is. */
export async function holdJob(id: string, signal?: AbortSignal): Promise<JobView> {
  return json<JobView>(await request(`/jobs/${encodeURIComponent(id)}/hold`, { method: "POST", body: "{}", signal }));
}

/** The requester stops waiting (Cancel): the request is withdrawn, and nothing runs after it left. */
export async function withdrawJob(id: string): Promise<void> {
  await request(`/jobs/${encodeURIComponent(id)}/withdraw`, { method: "POST", body: "{}" });
}

/**
 * Follow a job (answered 202) until it ends, holding the request while it waits; its result as the
 * synchronous call would have given it. Cancel (the signal) withdraws the request.
 */
export async function followJob(
  id: string,
  started: number,
  onJob: (view: JobView) => void,
  signal?: AbortSignal,
): Promise<CallResult> {
  try {
    return await pollJob(id, started, onJob, signal);
  } catch (error) {
    if (signal?.aborted) void withdrawJob(id).catch(() => undefined);
    throw error;
  }
}

async function pollJob(
  id: string,
  started: number,
  onJob: (view: JobView) => void,
  signal?: AbortSignal,
): Promise<CallResult> {
  for (;;) {
    const view = await holdJob(id, signal);
    onJob(view);
    if (FINAL_STATES.includes(view.status)) {
      const result = view.result;
      if (!result) throw new JobEnded(view);
      if (result.status !== 200) throw new ApiError(result.status, errorText(result.body), null);
      const payload = JSON.parse(result.body) as CallPayload;
      return { status: 200, payload, millis: performance.now() - started };
    }
    await pause(1000, signal);
  }
}
