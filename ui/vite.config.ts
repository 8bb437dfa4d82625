import { defineConfig, type Plugin } from "vite";

const BASE = "/ui/";

// public/theme-init.js sets data-theme before the first paint. It is a classic (blocking) script
// in an external file, since the CSP allows no inline script; Vite only bundles module scripts,
// so the tag is added to the built page here.
function themeInit(): Plugin {
  return {
    name: "toolrun-theme-init",
    transformIndexHtml: {
      order: "post",
      handler: (html) => html.replace("<!-- theme-init -->", `<script src="${BASE}theme-init.js"></script>`),
    },
  };
}

// The app is served by `toolrun serve --ui` at /ui/ (src/toolrun/server/ui.py) from ../ui-dist.
// No inline script or style ends up in the output, so it runs under a strict CSP
// (script-src 'self'; style-src 'self').
export default defineConfig({
  base: BASE,
  plugins: [themeInit()],
  oxc: {
    jsx: { runtime: "automatic", importSource: "preact" },
  },
  build: {
    outDir: "../ui-dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // Never inline assets as data: URLs (fonts would break font-src 'self').
    assetsInlineLimit: 0,
    sourcemap: false,
    target: "es2022",
    modulePreload: { polyfill: false },
  },
  server: {
    // `npm run dev` with a `toolrun serve` on :8080: the API is proxied, the UI hot-reloads.
    proxy: {
      "^/(tools|search|whoami)": "http://127.0.0.1:8080",
    },
  },
});
