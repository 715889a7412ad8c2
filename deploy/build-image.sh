#!/usr/bin/env bash
# Builds the sebulba image without pulling anything (machines with no registry):
# an image FROM scratch holding the host-built binary, the shared libraries
# `ldd` lists for it and the dynamic loader. Tagged like the image the world
# Dockerfile builds, so the same docker-compose.yml runs either.
#
#   deploy/build-image.sh [path/to/sebulba]     (default: target/release/sebulba,
#                                                built with cargo if missing)
# Env: SEBULBA_IMAGE (tag, default sebulba:latest).
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${SEBULBA_IMAGE:-sebulba:latest}"
bin="${1:-target/release/sebulba}"
if [ ! -x "$bin" ]; then
  echo "== building $bin"
  cargo build --release --bin sebulba
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/runs" "$root/tmp" "$root/etc"
# Debug info is for the host; the image gets the code only.
objcopy --strip-debug "$bin" "$root/usr/local/bin/sebulba"
# Every shared library the binary loads, and the loader itself, at their paths.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
  while read -r lib; do
    cp --parents -L "$lib" "$root"
  done
# glibc resolves service names through these (compose's DNS answers).
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"

cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
WORKDIR /runs
ENTRYPOINT ["/usr/local/bin/sebulba"]
DOCKERFILE

echo "== docker build -t $tag (FROM scratch, nothing pulled)"
docker build -q -t "$tag" "$ctx"
docker run --rm "$tag" --version
