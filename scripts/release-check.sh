#!/usr/bin/env bash
# Release checks (README "Install"), run by .ci/run after the tests, and by hand before a release:
#   1. goreleaser check: .goreleaser.yaml is valid;
#   2. goreleaser build --snapshot --single-target: this machine's binary, built as a release is,
#      and `poppy-mcp version` says the stamped snapshot version;
#   3. the MCP Bundle: mcpb/manifest.json validated by @anthropic-ai/mcpb (pinned), then packed with
#      that binary into dist/poppy-mcp-OS-ARCH.mcpb, unpacked again and its binary run.
# goreleaser is built from the Go module proxy once (go install, outside this module's go.mod) and
# kept with the npm package in POPPY_RELEASE_TOOLS (default ~/.cache/poppy-mcp-release, outside the
# clone, so CI's fresh clones on one machine reuse them). A first build of goreleaser took 4.5 min of
# CPU here (28 min on the clock, with the machine shared by eight builds); reused, the whole script
# takes under a minute.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GORELEASER_VERSIONS=(v2.17.0 v2.15.1) # the second if the first's dependencies cannot be fetched
MCPB_VERSION=2.1.2
tools="${POPPY_RELEASE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/poppy-mcp-release}"
mkdir -p "$tools"

goreleaser=""
for v in "${GORELEASER_VERSIONS[@]}"; do
  if [ -x "$tools/goreleaser-$v" ]; then goreleaser="$tools/goreleaser-$v"; break; fi
  start=$(date +%s)
  bin=$(mktemp -d)
  # GOFLAGS= : .ci/run's -mod=readonly is for this module, not for installing a program at a version.
  if GOFLAGS= GOBIN="$bin" go install "github.com/goreleaser/goreleaser/v2@$v"; then
    mv "$bin/goreleaser" "$tools/goreleaser-$v"
    rm -rf "$bin"
    echo "release-check: built goreleaser $v in $(( $(date +%s) - start ))s"
    goreleaser="$tools/goreleaser-$v"
    break
  fi
  rm -rf "$bin"
  echo "release-check: goreleaser $v did not build; trying the next version" >&2
done
[ -n "$goreleaser" ] || { echo "release-check: no goreleaser could be built" >&2; exit 1; }

mcpb="$tools/mcpb/node_modules/.bin/mcpb"
if [ ! -x "$mcpb" ] || [ "$("$mcpb" --version)" != "$MCPB_VERSION" ]; then
  mkdir -p "$tools/mcpb"
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$tools/mcpb" "@anthropic-ai/mcpb@$MCPB_VERSION" >/dev/null
fi

"$goreleaser" check
goos=$(go env GOOS) goarch=$(go env GOARCH)
exe=poppy-mcp
[ "$goos" = windows ] && exe=poppy-mcp.exe
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bundle/server"
"$goreleaser" build --snapshot --single-target --clean --output "$stage/bundle/server/$exe"
version=$("$stage/bundle/server/$exe" version)
echo "release-check: $version"
case "$version" in
  "poppy-mcp "*-snapshot*) ;;
  *) echo "release-check: the snapshot's version was not stamped (.goreleaser.yaml ldflags): $version" >&2; exit 1 ;;
esac

"$mcpb" validate mcpb/manifest.json
cp mcpb/manifest.json "$stage/bundle/manifest.json"
out="$root/dist/poppy-mcp-$goos-$goarch.mcpb"
"$mcpb" pack "$stage/bundle" "$out"
"$mcpb" unpack "$out" "$stage/unpacked" >/dev/null
"$stage/unpacked/server/$exe" version >/dev/null
echo "release-check: $out ($(du -h "$out" | cut -f1)) packs and runs"
