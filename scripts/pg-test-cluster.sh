#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for fencepost's tests, in a temp dir,
# on 127.0.0.1:${FENCEPOST_PG_PORT:-54329}, with trust auth and a database
# `fencepost`. Prints `export FENCEPOST_TEST_PG_URL=...` and
# `export FENCEPOST_PG_DIR=...` for eval; `scripts/pg-test-cluster.sh stop DIR`
# stops it and removes the dir.
#
#   eval "$(scripts/pg-test-cluster.sh start)"
#   cargo test --workspace
#   scripts/pg-test-cluster.sh stop "$FENCEPOST_PG_DIR"
set -euo pipefail

port=${FENCEPOST_PG_PORT:-54329}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ]; then
  echo "pg-test-cluster: no PostgreSQL server found under /usr/lib/postgresql (apt-get install -y postgresql)" >&2
  exit 1
fi

# Run as the postgres user when we are root (initdb refuses root).
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-start}" in
  start)
    dir=$(mktemp -d /tmp/fencepost-pg.XXXXXX)
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bindir/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2; exit 1; }
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null || {
      cat "$dir/server.log" >&2; exit 1; }
    as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres fencepost
    echo "export FENCEPOST_PG_DIR=$dir"
    echo "export FENCEPOST_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/fencepost"
    ;;
  stop)
    dir=${2:?usage: pg-test-cluster.sh stop DIR}
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: pg-test-cluster.sh start | stop DIR" >&2
    exit 2
    ;;
esac
