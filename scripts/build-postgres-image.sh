#!/usr/bin/env bash
# Builds fencepost/postgres:$FENCEPOST_IMAGE_TAG (default dev) without
# pulling anything: Debian's PostgreSQL server (apt-get install postgresql)
# copied with the libraries it links into a FROM scratch image, with a data
# directory initialised here. `experiments chaos --runtime docker` starts it
# when no --pg-url is given, and kills it (`docker kill`) to crash it.
#
#   scripts/build-postgres-image.sh
#   FENCEPOST_IMAGE_TAG=ci scripts/build-postgres-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${FENCEPOST_IMAGE_TAG:-dev}
bin=$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
  echo "build-postgres-image: no /usr/lib/postgresql/*/bin/postgres (apt-get install postgresql)" >&2
  exit 1
fi
if ! docker info >/dev/null 2>&1; then
  echo "build-postgres-image: the Docker engine is not reachable (docker info failed)" >&2
  exit 1
fi
if ! id postgres >/dev/null 2>&1; then
  echo "build-postgres-image: no postgres user (Debian's postgresql package makes it)" >&2
  exit 1
fi
pg_root=$(dirname "$(dirname "$bin")")            # /usr/lib/postgresql/15
major=$(basename "$pg_root")
uid=$(id -u postgres)
gid=$(id -g postgres)

stage=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-pg-image.XXXXXX")
chmod 755 "$stage"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
mkdir -p "$root/etc" "$root/usr/share/zoneinfo/Etc" "$root/usr/share/postgresql" "$pg_root" \
  "$root$pg_root/lib" "$root/var/lib/postgresql"

# The server and every library it links (the loader included), symlinks resolved.
for f in "$bin" $(ldd "$bin" | awk '/=>/ { print $3 } /ld-linux/ { print $1 }'); do
  mkdir -p "$root$(dirname "$f")"
  cp -L "$f" "$root$f"
done
# postgres finds share/ and lib/ from its own resolved path, so the entry
# point is a link to it (in a directory: postgres cannot resolve a link in /).
mkdir -p "$root/usr/local/bin"
ln -s "$bin" "$root/usr/local/bin/postgres"
cp "$pg_root"/lib/*.so "$root$pg_root/lib/"
cp -r "/usr/share/postgresql/$major" "$root/usr/share/postgresql/"
cp -L /usr/share/zoneinfo/UTC "$root/usr/share/zoneinfo/UTC"
cp -L /usr/share/zoneinfo/Etc/UTC "$root/usr/share/zoneinfo/Etc/UTC"
# postgres looks its own user up (getpwuid) and refuses to run as root.
echo "postgres:x:$uid:$gid::/var/lib/postgresql:/nonexistent" > "$root/etc/passwd"
echo "postgres:x:$gid:" > "$root/etc/group"

# A data directory owned by postgres, mode 0700, initialised here.
mkdir -p "$stage/pgdata/data"
chown -R postgres:postgres "$stage/pgdata"
chmod 700 "$stage/pgdata/data"
runuser -u postgres -- "$pg_root/bin/initdb" -D "$stage/pgdata/data" -U postgres \
  --auth=trust -E UTF8 --locale=C >"$stage/initdb.log" 2>&1 || {
  cat "$stage/initdb.log" >&2
  exit 1
}
echo "host all all 0.0.0.0/0 trust" >> "$stage/pgdata/data/pg_hba.conf"
cat >> "$stage/pgdata/data/postgresql.conf" <<CONF
listen_addresses = '*'
unix_socket_directories = ''
timezone = 'UTC'
log_timezone = 'UTC'
max_connections = 200
CONF

docker build --quiet --build-arg "PG_MAJOR=$major" --build-arg "PG_UID=$uid" \
  --build-arg "PG_GID=$gid" -f docker/postgres.Dockerfile -t "fencepost/postgres:$tag" "$stage" >/dev/null
echo "build-postgres-image: built"
docker images --format '  {{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}' "fencepost/postgres:$tag"
