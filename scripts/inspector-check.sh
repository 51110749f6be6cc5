#!/usr/bin/env bash
# Drive `poppy-mcp serve --demo` with clients we did not write: the MCP Inspector's CLI
# (npm @modelcontextprotocol/inspector) and the TypeScript SDK client it ships, pinned to
# each MCP revision (scripts/ts-client-check.mjs), over stdio and streamable HTTP. They list
# the tools and call discover_company and start_session, and the script fails when any
# answer is missing or an error. Run by .ci/run; rerun by hand any time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ext="$root/testdata-external/inspector"
if [ ! -x "$ext/node_modules/.bin/mcp-inspector" ]; then
  mkdir -p "$ext"
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$ext" @modelcontextprotocol/inspector@2.12.0 >/dev/null
fi
inspector() { MCP_CATALOG_PATH="$work/catalog.json" timeout 90 "$ext/node_modules/.bin/mcp-inspector" --cli "$@"; }
bin="$work/poppy-mcp"
(cd "$root" && go build -o "$bin" ./cmd/poppy-mcp)
fail() { echo "inspector-check: FAIL: $*" >&2; exit 1; }
expect() { # expect NAME JSON-FILE NODE-EXPRESSION-ON-r
  node -e "const r=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8')); if(!($3)) process.exit(1)" "$2" \
    || fail "$1: unexpected answer: $(head -c 600 "$2")"
  echo "inspector-check: ok: $1"
}
check() { # check LABEL TARGET-ARGS...
  local label=$1; shift
  inspector "$@" --method tools/list >"$work/list.json" 2>"$work/err" || fail "$label tools/list: $(tail -3 "$work/err")"
  expect "$label tools/list" "$work/list.json" "r.tools.some(t=>t.name==='discover_company') && r.tools.some(t=>t.name==='start_session')"
  inspector "$@" --method tools/call --tool-name discover_company --tool-arg domain=demo.poppy.example >"$work/disc.json" 2>"$work/err" \
    || fail "$label discover_company: $(tail -3 "$work/err")"
  expect "$label discover_company" "$work/disc.json" "!r.isError && r.structuredContent.usable===true"
  inspector "$@" --method tools/call --tool-name start_session --tool-arg domain=demo.poppy.example >"$work/sess.json" 2>"$work/err" \
    || fail "$label start_session: $(tail -3 "$work/err")"
  expect "$label start_session" "$work/sess.json" "!r.isError && /^ses_/.test(r.structuredContent.session_id)"
}
check stdio --transport stdio "$bin" serve --demo --state-dir "$work/state-stdio"
# HTTP mode needs a bearer token: serve makes one in its state directory on the first start.
"$bin" serve --demo --state-dir "$work/state-http" --http 127.0.0.1:0 2>"$work/http.log" &
for _ in $(seq 50); do grep -q 'url=http' "$work/http.log" && break; sleep 0.2; done
url=$(grep -o 'url=http[^ ]*' "$work/http.log" | head -1 | cut -d= -f2)
[ -n "$url" ] || fail "serve --http did not start: $(cat "$work/http.log")"
token=$(cat "$work/state-http/http-token") || fail "serve --http made no token file"
grep -qF "$token" "$work/http.log" && fail "serve --http wrote its token to the log"
status() { # status URL [HEADER-NAME HEADER-VALUE]: the HTTP status of an MCP initialize request
  node -e 'const [u, k, v] = process.argv.slice(1); const h = {"content-type": "application/json", accept: "application/json, text/event-stream"};
    if (k) h[k] = v;
    fetch(u, {method: "POST", headers: h, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize",
      params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "inspector-check", version: "1"}}})})
      .then(r => console.log(r.status), e => { console.error(e); process.exit(1); })' "$@"
}
[ "$(status "$url")" = 401 ] || fail "/mcp answered a client without the token"
echo "inspector-check: ok: /mcp refuses a client without the token (401)"
check http --transport http --server-url "$url" --header "Authorization: Bearer $token"
echo "inspector-check: passed (stdio and streamable HTTP)"
# The TypeScript SDK client itself, pinned to each MCP revision (2025-11-25, 2026-07-28); the
# token goes by environment, not on a command line.
POPPY_HTTP_TOKEN="$token" node "$root/scripts/ts-client-check.mjs" "$bin" "$url" || fail "TypeScript SDK client"
