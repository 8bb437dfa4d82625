// ESLint for the UI sources (`make ui-lint`, run by `make test`): the recommended JavaScript and
// typescript-eslint rules, and the React hooks rules (Preact's hooks follow the same rules: called
// unconditionally, at the top level of a component or hook, with complete dependency lists).
import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "../ui-dist/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["src/**/*.{ts,tsx}"],
    plugins: { "react-hooks": reactHooks },
    rules: {
      "react-hooks/rules-of-hooks": "error",
      "react-hooks/exhaustive-deps": "error",
    },
  },
  {
    files: ["public/**/*.js"],
    languageOptions: { globals: { window: "readonly", document: "readonly" } },
  },
  {
    files: ["vite.config.ts", "eslint.config.js"],
    languageOptions: { globals: { process: "readonly", Buffer: "readonly" } },
  },
);
