#!/usr/bin/env bash
# Builds fencepost's container images on a machine with no registry: static
# binaries (`-C target-feature=+crt-static`, a static-pie that runs in an empty
# root) copied into `FROM scratch` images, so nothing is pulled.
#
#   scripts/build-images.sh            # -> fencepost/lock-server:dev, fencepost/rail-stub:dev
#   scripts/build-images.sh --with-bench   # also fencepost/bench:dev (compose's bench profile)
#   FENCEPOST_IMAGE_TAG=ci scripts/build-images.sh
#
# The static release build has its own target directory (different RUSTFLAGS
# would otherwise rebuild the shared one): $FENCEPOST_STATIC_TARGET_DIR, else
# "${CARGO_TARGET_DIR}-static" when CARGO_TARGET_DIR is set, else
# ./target-static. Running it again rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

services=(lock-server rail-stub)
case "${1:-}" in
  "") ;;
  --with-bench) services+=(bench) ;;
  *) echo "usage: scripts/build-images.sh [--with-bench]" >&2; exit 2 ;;
esac
tag=${FENCEPOST_IMAGE_TAG:-dev}
triple=x86_64-unknown-linux-gnu
if [ -n "${FENCEPOST_STATIC_TARGET_DIR:-}" ]; then
  target_dir=$FENCEPOST_STATIC_TARGET_DIR
elif [ -n "${CARGO_TARGET_DIR:-}" ]; then
  target_dir="${CARGO_TARGET_DIR%/}-static"
else
  target_dir="$repo/target-static"
fi
locked=()
[ "${CI:-}" = true ] && locked=(--locked)

if ! docker info >/dev/null 2>&1; then
  echo "build-images: the Docker engine is not reachable (docker info failed)" >&2
  exit 1
fi

echo "build-images: static release build into $target_dir"
start=$SECONDS
RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR="$target_dir" \
  cargo build --release "${locked[@]}" --target "$triple" "${services[@]/#/-p=}"
RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR="$target_dir/healthcheck" \
  cargo build --release "${locked[@]}" --target "$triple" --manifest-path docker/healthcheck/Cargo.toml
echo "build-images: binaries built in $((SECONDS - start)) s"

bin_dir="$target_dir/$triple/release"
probe="$target_dir/healthcheck/$triple/release/healthcheck"
for b in "${services[@]/#/$bin_dir/}" "$probe"; do
  # A static-pie has no program interpreter; a dynamic binary would not start in scratch.
  if readelf -l "$b" | grep -q 'program interpreter'; then
    echo "build-images: $b is dynamically linked; it would not run in a FROM scratch image" >&2
    exit 1
  fi
done

stage=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-images.XXXXXX")
trap 'rm -rf "$stage"' EXIT
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

for svc in "${services[@]}"; do
  ctx="$stage/$svc"
  mkdir -p "$ctx/tmp"
  chmod 1777 "$ctx/tmp"
  cp "$bin_dir/$svc" "$ctx/$svc"
  [ "$svc" = bench ] || cp "$probe" "$ctx/healthcheck"
  docker build --quiet \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    -f "docker/$svc.Dockerfile" -t "fencepost/$svc:$tag" "$ctx" >/dev/null
done

echo "build-images: built"
for svc in "${services[@]}"; do
  docker images --format '  {{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}' "fencepost/$svc:$tag"
done
