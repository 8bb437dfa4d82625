import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
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

// ui-dist/ is committed (a pip-installed toolrun serves it without Node.js), so the build records
// which sources it came from: ui-dist/.source-hash, the same fingerprint ui/source_hash.py computes
// (every file under ui/ but node_modules/, __pycache__/ and dot-files, sorted by path; per file the
// path, NUL, byte length, NUL, bytes). tests/test_ui.py fails when the two differ: run `make ui`.
const UI_ROOT = fileURLToPath(new URL(".", import.meta.url));

function sourceFiles(dir: string, prefix: string, out: [string, string][]): [string, string][] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || entry.name === "node_modules" || entry.name === "__pycache__") continue;
    const name = prefix ? `${prefix}/${entry.name}` : entry.name;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sourceFiles(path, name, out);
    else if (entry.isFile()) out.push([name, path]);
  }
  return out;
}

export function sourceHash(root: string = UI_ROOT): string {
  const digest = createHash("sha256");
  const files = sourceFiles(root, "", []).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [name, path] of files) {
    const data = readFileSync(path);
    digest.update(Buffer.concat([Buffer.from(`${name}\0${data.length}\0`), data]));
  }
  return digest.digest("hex");
}

function sourceStamp(): Plugin {
  return {
    name: "toolrun-source-stamp",
    apply: "build",
    generateBundle() {
      this.emitFile({ type: "asset", fileName: ".source-hash", source: `${sourceHash()}\n` });
    },
  };
}

// The app is served by `toolrun serve --ui` at /ui/ (src/toolrun/server/ui.py) from ../ui-dist.
// No inline script or style ends up in the output, so it runs under a strict CSP
// (script-src 'self'; style-src 'self').
export default defineConfig({
  base: BASE,
  plugins: [themeInit(), sourceStamp()],
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
