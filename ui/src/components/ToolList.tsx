// The list pane: the search box (empty: GET /tools; typed, debounced: GET /search), server pages
// of 10 with Prev/Next following has_more and next_offset, and group filters that narrow only the
// page currently loaded.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { listTools, PAGE_SIZE, type Page, searchTools } from "../api";
import { describeProblem, type Problem } from "../errors";
import { summaryText } from "../markdown";
import { href, type Route } from "../router";
import { ToolHints } from "./ToolHints";
import { ChevronLeftIcon, ChevronRightIcon, SearchIcon, XIcon } from "./icons";

export const DEBOUNCE_MS = 250;
/** Not a group people filter by: it marks the tools anyone may call without a key (shown, not toggled). */
export const PUBLIC_TAG = "public";

interface Props {
  route: Route;
  epoch: number;
  onQuery: (query: string) => void;
  onOffset: (offset: number) => void;
  onOpen: (key: string, event: MouseEvent) => void;
  searchRef: { current: HTMLInputElement | null };
}

export function ToolList({ route, epoch, onQuery, onOffset, onOpen, searchRef }: Props) {
  const [text, setText] = useState(route.query);
  const [page, setPage] = useState<Page | null>(null);
  const [loading, setLoading] = useState(true);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [filters, setFilters] = useState<string[]>([]);
  const [retry, setRetry] = useState(0);
  const prevRef = useRef<HTMLButtonElement>(null);
  const nextRef = useRef<HTMLButtonElement>(null);
  const paging = useRef<"prev" | "next" | null>(null);

  // The box follows the URL (Back/Forward), unless the user is mid-typing the same query.
  useEffect(() => {
    setText((current) => (current.trim() === route.query ? current : route.query));
  }, [route.query]);

  // Debounce typing into the route (which triggers the fetch below). Only typing restarts the
  // timer; the route and the callback are read when it fires.
  const latest = useRef({ query: route.query, onQuery });
  latest.current = { query: route.query, onQuery };
  useEffect(() => {
    const query = text.trim();
    if (query === latest.current.query) return undefined;
    const timer = window.setTimeout(() => latest.current.onQuery(query), DEBOUNCE_MS);
    return () => window.clearTimeout(timer);
  }, [text]);

  useEffect(() => {
    const abort = new AbortController();
    setLoading(true);
    setProblem(null);
    const load = route.query
      ? searchTools(route.query, route.offset, abort.signal)
      : listTools(route.offset, abort.signal);
    load
      .then((result) => {
        setPage(result);
        setLoading(false);
      })
      .catch((error: unknown) => {
        if (error instanceof DOMException && error.name === "AbortError") return;
        setProblem(describeProblem(error, "load"));
        setLoading(false);
      });
    return () => abort.abort();
  }, [route.query, route.offset, epoch, retry]);

  // Keep keyboard focus on the pager when the pressed button becomes disabled.
  useEffect(() => {
    if (loading || !page || paging.current === null) return;
    const pressed = paging.current === "next" ? nextRef.current : prevRef.current;
    const other = paging.current === "next" ? prevRef.current : nextRef.current;
    if (pressed?.disabled && document.activeElement === document.body) other?.focus();
    paging.current = null;
  }, [loading, page]);

  const items = useMemo(() => page?.items ?? [], [page]);
  const groups = useMemo(() => {
    const all = new Set<string>(filters);
    for (const tool of items) for (const group of tool.groups) if (group !== PUBLIC_TAG) all.add(group);
    return [...all].sort();
  }, [items, filters]);
  const shown = items.filter((tool) => filters.every((group) => tool.groups.includes(group)));

  const toggle = (group: string) =>
    setFilters((current) => (current.includes(group) ? current.filter((g) => g !== group) : [...current, group]));

  const first = page && page.total > 0 ? page.offset + 1 : 0;
  const last = page ? page.offset + page.items.length : 0;
  const pageNumber = page ? Math.floor(page.offset / PAGE_SIZE) + 1 : 1;
  const pageCount = page ? Math.max(1, Math.ceil(page.total / PAGE_SIZE)) : 1;

  return (
    <section class="list-pane" aria-labelledby="list-heading">
      <h2 id="list-heading" class="sr-only">
        Tools
      </h2>
      <form class="search" role="search" onSubmit={(event) => {
        event.preventDefault();
        if (text.trim() !== route.query) onQuery(text.trim());
      }}>
        <label for="search" class="sr-only">
          Search tools
        </label>
        <SearchIcon />
        <input
          id="search"
          ref={searchRef}
          class="search-input"
          type="search"
          placeholder="Search tools…"
          autocomplete="off"
          spellcheck={false}
          enterKeyHint="search"
          aria-describedby="search-hint"
          value={text}
          onInput={(event) => setText((event.currentTarget as HTMLInputElement).value)}
          onKeyDown={(event) => {
            if (event.key === "Escape" && text) {
              event.preventDefault();
              setText("");
            }
          }}
        />
        <kbd class="search-kbd" aria-hidden="true">
          /
        </kbd>
        <span id="search-hint" class="sr-only">
          Press slash to jump here from anywhere. Empty lists every tool you can access.
        </span>
      </form>

      {groups.length > 0 && (
        <div class="filter-row" role="group" aria-label="Filter this page by group">
          <span class="filter-label">Groups</span>
          {groups.map((group) => (
            <button
              type="button"
              key={group}
              class="chip chip-toggle"
              aria-pressed={filters.includes(group) ? "true" : "false"}
              onClick={() => toggle(group)}
            >
              {group}
            </button>
          ))}
          {filters.length > 0 && (
            <button type="button" class="btn btn-small btn-link" onClick={() => setFilters([])}>
              <XIcon size={12} /> Clear
            </button>
          )}
        </div>
      )}

      <div class="list-status" role="status" aria-live="polite" data-testid="list-status">
        {problem
          ? ""
          : page && !loading
            ? page.total === 0
              ? route.query
                ? `No good match for “${route.query}”.`
                : "No tools are visible to you."
              : page.items.length === 0
                ? `Nothing on this page: there are ${page.total} in all.`
                : `${route.query ? `Results for “${route.query}”` : "All tools"}: ${first}–${last} of ${page.total}` +
                (filters.length > 0 ? ` · ${shown.length} shown on this page` : "")
            : "Loading…"}
      </div>

      {problem && (
        <div class="notice notice-error" role="alert">
          <strong>{problem.title}</strong>
          {problem.detail && <span> {problem.detail}</span>}
          {problem.body && <pre class="output output-error">{problem.body}</pre>}
          <button type="button" class="btn btn-small" onClick={() => setRetry((n) => n + 1)}>
            Try again
          </button>
        </div>
      )}

      <ul class={`cards${loading && page ? " is-stale" : ""}`} aria-busy={loading ? "true" : "false"} data-testid="cards">
        {!page &&
          loading &&
          Array.from({ length: 4 }, (_, i) => (
            <li class="card card-skeleton" key={`s${i}`} aria-hidden="true">
              <div class="skeleton skeleton-title" />
              <div class="skeleton skeleton-line" />
            </li>
          ))}
        {shown.map((tool) => {
          const selected = tool.key === route.tool;
          const summary = summaryText(tool.description);
          return (
            <li class={`card${selected ? " is-selected" : ""}`} key={tool.key} data-key={tool.key}>
              <div class="card-top">
                <a
                  class="card-link"
                  href={href({ ...route, tool: tool.key })}
                  aria-current={selected ? "page" : undefined}
                  onClick={(event) => onOpen(tool.key, event)}
                >
                  {tool.key}
                </a>
                {tool.score !== undefined && (
                  <span class="card-score" title="How well it matches the search, 0 to 1">
                    {tool.score.toFixed(2)}
                  </span>
                )}
                <span class="card-params">
                  {tool.params.length === 0
                    ? "no params"
                    : tool.params.length === 1
                      ? "1 param"
                      : `${tool.params.length} params`}
                </span>
              </div>
              {summary && <p class="card-summary">{summary}</p>}
              <ToolHints
                annotations={tool.annotations}
                small
                approvers={tool.approval?.required ? tool.approval.approvers : undefined}
                runsAsJob={tool.async === true}
              />
              <ul class="chips" aria-label={`Groups of ${tool.key}`}>
                {tool.groups.map((group) => (
                  <li key={group}>
                    {group === PUBLIC_TAG ? (
                      <span class="chip chip-public" title="Anyone may see and call it, without an API key">
                        {group}
                      </span>
                    ) : (
                      <button
                        type="button"
                        class="chip chip-toggle"
                        aria-pressed={filters.includes(group) ? "true" : "false"}
                        title={`Filter this page by ${group}`}
                        onClick={() => toggle(group)}
                      >
                        {group}
                      </button>
                    )}
                  </li>
                ))}
              </ul>
            </li>
          );
        })}
        {page && !loading && items.length > 0 && shown.length === 0 && (
          <li class="empty">No tool on this page has all of: {filters.join(", ")}.</li>
        )}
      </ul>

      {page && (page.offset > 0 || page.has_more) && (
        <nav class="pager" aria-label="Pages">
          <button
            type="button"
            ref={prevRef}
            class="btn"
            disabled={page.offset === 0}
            onClick={() => {
              if (loading) return;
              paging.current = "prev";
              onOffset(Math.max(0, page.offset - PAGE_SIZE));
            }}
          >
            <ChevronLeftIcon size={14} /> Prev
          </button>
          <span class="pager-info">
            Page {pageNumber} of {pageCount}
          </span>
          <button
            type="button"
            ref={nextRef}
            class="btn"
            disabled={!page.has_more || page.next_offset === null}
            onClick={() => {
              if (loading) return;
              paging.current = "next";
              if (page.next_offset !== null) onOffset(page.next_offset);
            }}
          >
            Next <ChevronRightIcon size={14} />
          </button>
        </nav>
      )}
    </section>
  );
}
