#!/usr/bin/env bash
# Install what the full test suite needs beyond Go: real OpenAPI documents and two MCP
# programs nobody here wrote (npm, pinned), Debian's Chromium for the browser tests and
# Debian's PostgreSQL for the store's tests.
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
# Debian's packages, with at most one apt-get update: Chromium for the browser tests, and
# PostgreSQL (initdb, pg_ctl) for the store's tests on PostgreSQL (scripts/pg-test-server.sh
# runs a throwaway cluster; Debian keeps the binaries in /usr/lib/postgresql/VERSION/bin).
have_postgres() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }
apt=()
command -v chromium >/dev/null 2>&1 || apt+=(chromium fonts-liberation)
have_postgres || apt+=(postgresql)
if [ ${#apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    # The package would make and start a cluster of its own; the tests make theirs.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/poppy-no-main.conf
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${apt[@]}" >/dev/null
  else
    echo "install-test-deps: missing ${apt[*]}; run as root, or: sudo apt-get install ${apt[*]}" >&2
  fi
fi
command -v chromium >/dev/null && echo "install-test-deps: $(chromium --version 2>/dev/null | head -1)"
if have_postgres; then
  echo "install-test-deps: PostgreSQL $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 | cut -d/ -f5)"
fi
