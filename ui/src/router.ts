// Path routing under /ui/: `/ui/` is the list, `/ui/tools/<key>` a tool's detail; the list's
// query and offset live in the query string (`?q=disk&offset=10`), so links and Back work.
// The server answers every such path with index.html (the SPA fallback in ui.py).

export const BASE = "/ui/";

export interface Route {
  tool: string | null;
  query: string;
  offset: number;
}

export function parseLocation(location: Location = window.location): Route {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "";
  let tool: string | null = null;
  const match = /^tools\/([^/]+)\/?$/.exec(path);
  if (match) {
    try {
      tool = decodeURIComponent(match[1]!);
    } catch {
      tool = null;
    }
  }
  const params = new URLSearchParams(location.search);
  const offset = Number(params.get("offset") ?? "0");
  return {
    tool,
    query: params.get("q") ?? "",
    offset: Number.isInteger(offset) && offset > 0 ? offset : 0,
  };
}

export function href(route: Route): string {
  const params = new URLSearchParams();
  if (route.query) params.set("q", route.query);
  if (route.offset) params.set("offset", String(route.offset));
  const search = params.toString();
  const path = route.tool ? `${BASE}tools/${encodeURIComponent(route.tool)}` : BASE;
  return search ? `${path}?${search}` : path;
}

export function navigate(route: Route, replace = false): void {
  const url = href(route);
  if (url === window.location.pathname + window.location.search) return;
  if (replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
}
