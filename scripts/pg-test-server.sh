#!/usr/bin/env bash
# A throwaway PostgreSQL for the store's tests: a cluster in a new temporary directory, reached
# only through a Unix socket in that directory (no TCP port to collide with), with one database.
#
#   DSN=$(bash scripts/pg-test-server.sh start)   # prints the DSN, e.g. for POPPY_TEST_POSTGRES
#   bash scripts/pg-test-server.sh restart "$DSN"  # restarts it (fast shutdown: connections drop)
#   bash scripts/pg-test-server.sh stop "$DSN"     # stops it and removes the directory
#
# initdb refuses to run as root: as root, the cluster runs as the `postgres` user (Debian's
# package makes it). Debian keeps the binaries in /usr/lib/postgresql/VERSION/bin, often not on
# PATH; the newest there is used, else what PATH has. scripts/install-test-deps.sh installs them.
# The cluster trusts local connections and skips fsync: it is for tests only.
set -euo pipefail

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return; fi
  echo "pg-test-server: PostgreSQL is not installed (initdb, pg_ctl); run scripts/install-test-deps.sh as root" >&2
  exit 1
}

# as USER CMD...: runs CMD as the cluster's owner.
as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bin dir
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/poppy-pg.XXXXXX")
  chmod 755 "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  as "$bin/initdb" --pgdata="$dir/data" --auth=trust --encoding=UTF8 --locale=C --no-sync \
    --username=postgres >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  as "$bin/pg_ctl" start --pgdata="$dir/data" --wait --silent --log="$dir/server.log" \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  as "$bin/createdb" --host="$dir" --username=postgres poppy_test
  echo "host=$dir user=postgres dbname=poppy_test sslmode=disable"
}

# ours DSN: the cluster's directory, if this script made it.
ours() {
  local dir
  dir=$(sed -n 's/.*host=\([^ ]*\).*/\1/p' <<<"$1")
  [ -n "$dir" ] || dir=$1
  case "$dir" in
    */poppy-pg.*) echo "$dir" ;;
    *) echo "pg-test-server: $dir is not a directory this script made" >&2; exit 1 ;;
  esac
}

# restart: a fast shutdown (every connection is dropped, as when a database fails over), then a
# start with the options the cluster was started with (pg_ctl keeps them in postmaster.opts).
restart() {
  local dir
  dir=$(ours "$1")
  as "$(bindir)/pg_ctl" restart --pgdata="$dir/data" --mode=fast --wait --silent --log="$dir/server.log" >/dev/null
}

stop() {
  local dir
  dir=$(ours "$1")
  if [ -d "$dir/data" ]; then
    as "$(bindir)/pg_ctl" stop --pgdata="$dir/data" --mode=fast --wait --silent >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  restart) restart "${2:?usage: pg-test-server.sh restart DSN}" ;;
  stop) stop "${2:?usage: pg-test-server.sh stop DSN}" ;;
  *) echo "usage: pg-test-server.sh start | restart DSN | stop DSN" >&2; exit 2 ;;
esac
