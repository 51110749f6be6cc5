#!/usr/bin/env bash
# Install what the full test suite needs beyond Go: real OpenAPI documents and two MCP
# programs nobody here wrote (npm, pinned), and Debian's Chromium for the browser tests.
# .ci/run calls it; run it once on a development machine too (as root for apt-get).
# Without these the tests that need them skip with a message; CI sets POPPY_REQUIRE_*=1
# so that a skip there is a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
npm_install() { # npm_install DIR PACKAGE@VERSION...
  local dir=$1; shift
  mkdir -p "$dir"
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$dir" "$@" >/dev/null
}
bash "$root/scripts/fetch-openapi-specs.sh"
npm_install "$root/testdata-external/mcp-everything" @modelcontextprotocol/server-everything@2026.8.31
npm_install "$root/testdata-external/inspector" @modelcontextprotocol/inspector@2.12.0
echo "install-test-deps: npm packages ok"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
  else
    echo "install-test-deps: Chromium missing; run as root, or: sudo apt-get install chromium" >&2
  fi
fi
command -v chromium >/dev/null && echo "install-test-deps: $(chromium --version 2>/dev/null | head -1)"
