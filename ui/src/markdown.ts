// Tool descriptions are untrusted markdown. Two layers:
// 1. marked renders the markdown, with raw HTML shown as text (escaped), never as markup;
// 2. DOMPurify sanitizes the result anyway (no script, no event handlers, no javascript: or
//    other non-http(s)/mailto links, no inline styles, no forms, no frames).
// Escaping raw HTML also keeps Chromium from reporting CSP violations while DOMPurify parses
// hostile attributes in its inert document.

import DOMPurify from "dompurify";
import { Marked } from "marked";

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
  },
});

const purify = DOMPurify(window);

const SAFE_URL = /^(?:https?:|mailto:|#|\/(?!\/)|\.{0,2}\/|[^:/?#]*(?:[/?#]|$))/i;

purify.addHook("afterSanitizeAttributes", (node) => {
  if (node instanceof HTMLAnchorElement) {
    const href = node.getAttribute("href");
    if (href !== null && !SAFE_URL.test(href.trim())) node.removeAttribute("href");
    if (node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  }
  if (node instanceof HTMLImageElement) {
    const src = node.getAttribute("src") ?? "";
    // The CSP allows images from this origin and data: URLs only; drop the rest up front.
    if (!/^data:image\/(?:png|gif|jpe?g|webp);/i.test(src) && !/^\/(?!\/)/.test(src)) node.removeAttribute("src");
    node.setAttribute("loading", "lazy");
  }
});

const CONFIG = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option", "iframe", "object", "embed", "svg", "math"],
  FORBID_ATTR: ["style", "class", "id", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
};

/** Sanitized HTML for a markdown description. */
export function renderMarkdown(source: string): string {
  const html = marked.parse(source ?? "") as string;
  return purify.sanitize(html, CONFIG) as string;
}

const summaries = new Map<string, string>();

/** The first paragraph of a description as plain text (tool cards). */
export function summaryText(source: string): string {
  const cached = summaries.get(source);
  if (cached !== undefined) return cached;
  const fragment = purify.sanitize(marked.parse(source ?? "") as string, {
    ...CONFIG,
    RETURN_DOM_FRAGMENT: true,
  }) as DocumentFragment;
  const blocks = Array.from(fragment.children);
  const first = blocks.find((el) => el.tagName === "P" && el.textContent?.trim()) ?? blocks.find((el) => el.textContent?.trim());
  const text = (first?.textContent ?? "").replace(/\s+/g, " ").trim();
  if (summaries.size > 500) summaries.clear();
  summaries.set(source, text);
  return text;
}
