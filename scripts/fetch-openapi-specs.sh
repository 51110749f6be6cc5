#!/usr/bin/env bash
# Fetch real-world OpenAPI documents for openapi2tools' tests into testdata-external/
# (gitignored). Tests that need them skip without them, and fail when POPPY_REQUIRE_SPECS=1.
# Versions are pinned: openapi2tools' golden files (testdata/github-summary.golden,
# testdata/oas-examples/) are made from exactly these; bump both together.
#
#   testdata-external/node_modules/@octokit/openapi/generated/api.github.com.json
#   testdata-external/node_modules/@readme/oas-examples/{3.0,3.1,2.0}/{json,yaml}/*
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/testdata-external"
cd "$root/testdata-external"
npm install --no-save --no-audit --no-fund --loglevel=error --prefix . \
  @octokit/openapi@23.0.2 @readme/oas-examples@8.2.2 >/dev/null
gh=node_modules/@octokit/openapi/generated/api.github.com.json
[ -s "$gh" ] || { echo "fetch-openapi-specs: $gh missing after install" >&2; exit 1; }
[ -d node_modules/@readme/oas-examples/3.0 ] || { echo "fetch-openapi-specs: oas-examples layout changed" >&2; exit 1; }
echo "fetch-openapi-specs: ok ($(du -sh node_modules | cut -f1))"
