#!/usr/bin/env bash
# The tests, as README.md gives them: go vet ./..., then the race-enabled
# tests (go test -race ./...), read through internal/testsummary, which shows
# each package's line, the whole output of whatever failed, each skipped test
# with its reason, and last, alone on its line, "N passed, M failed, K skipped".
# Extra arguments go to go test before the packages (scripts/test.sh -count=1
# -run TestDoctor); an argument that starts with ./ is a package pattern and
# replaces ./... (scripts/test.sh ./store/...). .ci/run runs this script.
# Exit status: 0 when vet and every test passed, else non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/testsummary" ./internal/testsummary || exit 1

pkgs=(./...)
for a in "$@"; do
  case "$a" in ./*) pkgs=() ;; esac
done

vet=0
go vet ./... || vet=$?
if [ "$vet" -ne 0 ]; then
  echo "go vet ./... failed (above); the tests run all the same"
fi

go test -race -json "$@" "${pkgs[@]}" 2>&1 | "$bin/testsummary"
status=("${PIPESTATUS[@]}")
[ "$vet" -eq 0 ] && [ "${status[0]}" -eq 0 ] && [ "${status[1]}" -eq 0 ]
