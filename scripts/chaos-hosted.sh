#!/usr/bin/env bash
# The chaos run of a hosted deployment (BENCHMARKS.md "Chaos"; issue 27 part 6): TestChaosHosted in
# cmd/poppy-mcp builds the binary, starts poppytest (an account and an order per person), a real
# authorization server (internal/oidctest) and three `serve --http --auth-issuer` replicas on one
# PostgreSQL database behind a round-robin reverse proxy without stickiness. POPPY_CHAOS_PEOPLE
# people (default 200), each with their own access token and account, sign in (Device Sign-In,
# approved at the Company), talk to the Company Agent (send_message, read_events) and call its API
# (call_api) through the official go-sdk client for POPPY_CHAOS_DURATION (default 2m), retrying
# after a transport failure as a real client does, while a loop kills (SIGKILL), pauses
# (SIGSTOP/SIGCONT) and restarts replicas and restarts PostgreSQL once. It then checks: every
# sign-in started finished or was reported failed to its person; every message sent is at the
# Company exactly once; no person saw another's data; no replica ended but those killed. It exits
# 0 only when all four hold, and prints its figures. PostgreSQL is always a throwaway cluster of
# scripts/pg-test-server.sh, since the run restarts it. About 5 minutes on 2 cores.
# Usage: scripts/chaos-hosted.sh   (POPPY_CHAOS_LOG: the full output's file, POPPY_CHAOS_LOGDIR: the
# replicas' logs' directory; temporary ones by default)
set -uo pipefail
cd "$(dirname "$0")/.."
POPPY_TEST_POSTGRES=$(bash scripts/pg-test-server.sh start) || exit 1
trap 'bash scripts/pg-test-server.sh stop "$POPPY_TEST_POSTGRES"' EXIT
export POPPY_TEST_POSTGRES POPPY_CHAOS=1
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
echo "# POPPY_CHAOS=1 go test -run='^TestChaosHosted\$' -count=1 -v -timeout=10m ./cmd/poppy-mcp"
start=$(date +%s)
log=${POPPY_CHAOS_LOG:-$(mktemp "${TMPDIR:-/tmp}/chaos-hosted.XXXXXX.log")}
POPPY_CHAOS_LOGDIR=${POPPY_CHAOS_LOGDIR:-$(mktemp -d "${TMPDIR:-/tmp}/chaos-hosted-replicas.XXXXXX")}
export POPPY_CHAOS_LOGDIR
go test -run='^TestChaosHosted$' -count=1 -v -timeout=10m ./cmd/poppy-mcp 2>&1 | tee "$log" |
  grep --line-buffered -E '^(chaos: |--- |FAIL|ok |panic: |    chaos_)'
code=${PIPESTATUS[0]}
echo "# exit $code after $(( $(date +%s) - start )) s; load average now: $(cut -d' ' -f1-3 /proc/loadavg); full output in $log"
exit "$code"
