#!/usr/bin/env bash
# `make demo`: toolrun on the bundled example catalog with embedded defaults (no external server).
# The CLI first, then `toolrun serve` on a free loopback port for a few requests, then it stops.
set -euo pipefail
BIN=${BIN:-.venv/bin}
CATALOG=${CATALOG:-examples/}
export TOOLRUN_HOME=${TOOLRUN_HOME:-$(mktemp -d)}
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step toolrun list -c "$CATALOG";                          "$BIN/toolrun" list -c "$CATALOG"
step toolrun describe ops.disk_usage -c "$CATALOG";       "$BIN/toolrun" describe ops.disk_usage -c "$CATALOG"
step toolrun call ops.disk_usage path=/var -c "$CATALOG"; "$BIN/toolrun" call ops.disk_usage path=/var -c "$CATALOG"
step toolrun validate-catalog --strict "$CATALOG";        "$BIN/toolrun" validate-catalog --strict "$CATALOG"

PORT=$("$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
KEY=$("$BIN/toolrun" keys create demo -g ops 2>/dev/null)
UI=()
[ -f ui-dist/index.html ] && UI=(--ui)   # committed with the sources: every checkout and wheel has it
step toolrun serve -c "$CATALOG" --port "$PORT" "${UI[@]}"
"$BIN/toolrun" serve -c "$CATALOG" --port "$PORT" "${UI[@]}" --log-level warning &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
step curl "$URL/healthz";                              curl -s "$URL/healthz"; echo
step curl "$URL/tools?format=md"  "# anonymous: public tools"; curl -s "$URL/tools?format=md" | grep '^### '
step curl -X POST "$URL/tools/ops.echo" -d '{"msg": "hello from toolrun"}'
curl -s -X POST "$URL/tools/ops.echo" -H 'Content-Type: application/json' -d '{"msg": "hello from toolrun"}'
step curl "$URL/whoami" -H "X-API-Key: trk_…"
curl -s "$URL/whoami" -H "X-API-Key: $KEY"; echo
step curl "$URL/metrics" "| grep svc_tool_calls_total"; curl -s "$URL/metrics" | grep '^svc_tool_calls_total'
printf '\nThe server is stopping now. Keep one running with:\n  %s/toolrun serve -c %s --ui   # then open %s/ui\n' \
  "$BIN" "$CATALOG" "http://127.0.0.1:8080"
