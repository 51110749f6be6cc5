#!/usr/bin/env bash
# Rerun every benchmark recorded in BENCHMARKS.md. Each figure has its baseline from the same
# run (a direct HTTP call, a plain JSON decode): compare ratios, not absolute times, on a
# shared machine. Needs scripts/fetch-openapi-specs.sh for the GitHub and Graph documents.
# Usage: scripts/bench.sh [count]   (default 5 repetitions; feed the output to benchstat)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
[ -s testdata-external/node_modules/@octokit/openapi/generated/api.github.com.json ] || bash scripts/fetch-openapi-specs.sh
run() { echo "# go test -run='^\$' -bench='$2' -benchmem -count=$count $1"; go test -run='^$' -bench="$2" -benchmem -count="$count" "$1" | grep -E '^Benchmark'; }
run ./cache 'BenchmarkHit|BenchmarkDirect'
run ./auth 'BenchmarkProof|BenchmarkWhoami'
run ./openapi2tools 'BenchmarkTranslateGitHub|BenchmarkDecodeGitHub|BenchmarkUnmarshalCatalogGitHub'
# The store on both backends: PostgreSQL is a throwaway cluster unless POPPY_TEST_POSTGRES names one.
if [ -z "${POPPY_TEST_POSTGRES:-}" ] && POPPY_TEST_POSTGRES=$(bash scripts/pg-test-server.sh start 2>/dev/null); then
  trap 'bash scripts/pg-test-server.sh stop "$POPPY_TEST_POSTGRES"' EXIT
  export POPPY_TEST_POSTGRES
fi
run ./store 'BenchmarkStore|BenchmarkOpen'
for b in $(grep -rl --include='*_test.go' 'func Benchmark' mcpproxy tools conversation 2>/dev/null | xargs -r -n1 dirname | sort -u); do
  run "./$b" '.'
done
echo "# tools/list sizes, as the budget tests measure them"
go test -count=1 -run 'TestToolsListBudget|TestAPIGitHubExposure' -v ./tools | grep -E 'tools/list'
echo "# peak memory of translating GitHub's document (max resident set size, KB)"
go test -c -o /tmp/openapi2tools.test ./openapi2tools
( cd openapi2tools && /usr/bin/time -f '%M KB max RSS' /tmp/openapi2tools.test -test.run='^$' -test.bench=TranslateGitHub -test.benchtime=1x >/dev/null )
bash scripts/bench-openapi-memory.sh "$count"
bash scripts/bench-hosted.sh
