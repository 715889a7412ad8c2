#!/usr/bin/env bash
# Builds the sebulba image without pulling anything (machines with no registry):
# an image FROM scratch holding the host-built binary, the shared libraries
# `ldd` lists for it and the dynamic loader. Tagged like the image the world
# Dockerfile builds, so the same docker-compose.yml runs either.
#
#   deploy/build-image.sh [path/to/sebulba]     (default: target/release/sebulba,
#                                                built with cargo if missing)
# Env: SEBULBA_IMAGE (tag, default sebulba:latest); SEBULBA_IMAGE_VENV: a venv
# (e.g. .venv from scripts/python-env.sh) whose packages the image carries, with
# the Python standard library and every shared library their extension modules
# load, for Python environments (`gym:ID`, Atari's `ale:Game`; the binary
# built with `--features python`). EnvPool (`envpool:` ids) and its model
# assets weigh about 740 MB: left out unless SEBULBA_IMAGE_ENVPOOL=1.
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

python_env=""
if [ -n "${SEBULBA_IMAGE_VENV:-}" ]; then
  venv="$(cd "$SEBULBA_IMAGE_VENV" && pwd)"
  base="$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')"
  ver="$("$venv/bin/python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')"
  echo "== Python: $base/lib/$ver (standard library) and $venv's packages"
  # The standard library where the linked libpython looks for it (its prefix).
  mkdir -p "$root$base/lib" "$root/opt/venv/lib/$ver"
  tar -C "$base/lib" --exclude="$ver/site-packages" --exclude="$ver/test" \
    --exclude="$ver/config-*" --exclude='__pycache__' -cf - "$ver" | tar -C "$root$base/lib" -xf -
  envpool=(--exclude='site-packages/envpool*')
  [ "${SEBULBA_IMAGE_ENVPOOL:-0}" = 1 ] && envpool=()
  tar -C "$venv/lib/$ver" --exclude='__pycache__' --exclude='site-packages/pip' "${envpool[@]}" \
    -cf - site-packages | tar -C "$root/opt/venv/lib/$ver" -xf -
  # Shared libraries the extension modules load from outside the copied trees.
  find "$root$base/lib" "$root/opt/venv" -name '*.so*' -type f -print0 |
    xargs -0 ldd 2>/dev/null |
    awk -v r="$root" '$2 == "=>" && $3 ~ /^\// && index($3, r) != 1 { print $3 }' | sort -u |
    while read -r lib; do
      [ -e "$root$lib" ] || cp --parents -L "$lib" "$root"
    done
  python_env="ENV PYTHONHOME=$base VIRTUAL_ENV=/opt/venv"
fi

cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
$python_env
WORKDIR /runs
ENTRYPOINT ["/usr/local/bin/sebulba"]
DOCKERFILE

echo "== docker build -t $tag (FROM scratch, nothing pulled)"
docker build -q -t "$tag" "$ctx"
docker run --rm "$tag" --version
if [ -n "$python_env" ]; then
  # The image's Python makes and steps a Gymnasium env.
  docker run --rm "$tag" bench envs --env gym:CartPole-v1 --envs 2 --seconds 0.2 2>&1 | grep '^env '
  # And Atari, when the venv has ALE (scripts/python-requirements.txt): its
  # ROMs, its C++ vector env and OpenCV load from the image.
  if [ -d "$venv/lib/$ver/site-packages/ale_py" ]; then
    docker run --rm "$tag" bench envs --env ale:Pong --env gym:ALE/Pong-v5 --envs 2 --seconds 0.2 2>&1 | grep '^env '
  fi
  if [ "${SEBULBA_IMAGE_ENVPOOL:-0}" = 1 ]; then
    docker run --rm "$tag" bench envs --env envpool:HalfCheetah-v5 --env envpool:ALE/Pong-v5 --envs 2 --seconds 0.2 2>&1 | grep '^env '
  fi
fi
