#!/usr/bin/env bash
# The tests, as README.md gives them: go vet ./..., then the race-enabled
# tests (go test -race ./...), then openapi2tools' sweeps over real OpenAPI
# documents again without -race (wholeSweeps below), all read through
# internal/testsummary, which shows
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

# The sweeps over hundreds of real OpenAPI documents translate on one
# goroutine, where the race detector finds nothing and runs several times
# slower: under -race they take a sample (openapi2tools raceSample), and here,
# when the whole suite runs, they run whole without it.
wholeSweeps='^(TestOpenAPIDirectorySample|TestGitHubVariants)$'
sweeps() {
  case " $* " in *" -run"*) return 0 ;; esac
  [ "${#pkgs[@]}" -eq 1 ] && [ "${pkgs[0]}" = ./... ] || return 0
  go test -json "$@" -run "$wholeSweeps" ./openapi2tools
}

# They run beside the race run, which leaves a core idle at times, and their
# output follows its output.
{
  sweeps "$@" > "$bin/sweeps.json" 2>&1 &
  sweeping=$!
  go test -race -json "$@" "${pkgs[@]}"
  race=$?
  wait "$sweeping"
  whole=$?
  cat "$bin/sweeps.json"
  [ "$race" -eq 0 ] && [ "$whole" -eq 0 ]
} 2>&1 | "$bin/testsummary"
status=("${PIPESTATUS[@]}")
[ "$vet" -eq 0 ] && [ "${status[0]}" -eq 0 ] && [ "${status[1]}" -eq 0 ]
