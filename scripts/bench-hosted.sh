#!/usr/bin/env bash
# A hosted deployment under many waiting people (BENCHMARKS.md "Hosted: people waiting"):
# BenchmarkHostedWaiting in cmd/poppy-mcp builds the binary, starts poppytest and a real
# authorization server (internal/oidctest), then two `serve --http --auth-issuer` replicas on one
# PostgreSQL database and one replica on SQLite; each time, POPPY_BENCH_PEOPLE people (default
# 1000), each with their own access token, open a read_events long-poll, and an unrelated person's
# send_message is timed idle and under that load. It reports the replicas' RSS per waiting person
# and the p50/p99 latencies. PostgreSQL is a throwaway cluster unless POPPY_TEST_POSTGRES names one.
# POPPY_BENCH_NO_MCP=1 leaves out the Company's MCP server, so no person has a relay to it.
# Usage: scripts/bench-hosted.sh [count]   (default 1 round; about 2 minutes a round on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-1}
if [ -z "${POPPY_TEST_POSTGRES:-}" ]; then
  POPPY_TEST_POSTGRES=$(bash scripts/pg-test-server.sh start)
  trap 'bash scripts/pg-test-server.sh stop "$POPPY_TEST_POSTGRES"' EXIT
  export POPPY_TEST_POSTGRES
fi
echo "# $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg); people: ${POPPY_BENCH_PEOPLE:-1000}"
echo "# go test -run='^\$' -bench=BenchmarkHostedWaiting -benchtime=1x -count=$count -timeout=60m ./cmd/poppy-mcp"
go test -run='^$' -bench=BenchmarkHostedWaiting -benchtime=1x -count="$count" -timeout=60m ./cmd/poppy-mcp |
  grep -E '^(Benchmark|    bench_hosted_test)'
