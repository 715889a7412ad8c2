#!/usr/bin/env bash
# Packs what a GPU machine needs for scripts/device-check.sh into one folder
# (default .device, which git ignores; name it in the device call's `carry`):
#
#   sebulba.xz        the binary built with `--features cuda,python`,
#                     stripped and compressed (burn-cuda's kernels make it
#                     about 100 MB; a device call carries 64 MiB in all)
#   python.tar.xz     the Python it links (libpython, the standard library
#                     without its tests and tools) and the venv's packages
#                     that Atari needs (numpy, ale-py with its ROMs,
#                     Gymnasium), for `ale:` ids: the GPU machine has no
#                     Python 3.11 and no network
#   python-prefix     where the build's Python lives (sys.base_prefix): the
#                     binary looks for libpython and the standard library
#                     there, so the device script unpacks the runtime to
#                     that same path
#   bench/            a copy of the peer's torch_cnn_ppo_update.py
#
#   cargo build --release --features cuda,python --bin sebulba
#   scripts/device-pack.sh
#
# Env: SEBULBA (default target/release/sebulba), VIRTUAL_ENV (default .venv),
# PEERS (default ../shared/bench), DEST (default .device).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SEBULBA:-target/release/sebulba}
venv=${VIRTUAL_ENV:-.venv}
peers=${PEERS:-../shared/bench}
dest=${DEST:-.device}
[ -x "$bin" ] || { echo "device-pack: no binary at $bin" >&2; exit 1; }
[ -x "$venv/bin/python" ] || { echo "device-pack: no venv at $venv (scripts/python-env.sh)" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/bench"
strip -o "$dest/sebulba" "$bin"
xz -T0 -6 "$dest/sebulba"
cp "$peers/torch_cnn_ppo_update.py" "$dest/bench/"

base=$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')
ver=$("$venv/bin/python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
site="$venv/lib/$ver/site-packages"
echo "$base" >"$dest/python-prefix"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The runtime under its own prefix (lib/libpython*, lib/pythonX.Y), and the
# packages under venv/lib/pythonX.Y/site-packages, as VIRTUAL_ENV expects.
mkdir -p "$stage/prefix/lib" "$stage/venv/lib/$ver/site-packages"
cp -a "$base"/lib/libpython3*.so* "$stage/prefix/lib/"
strip --strip-unneeded "$stage"/prefix/lib/libpython3*.so.* 2>/dev/null || true
tar -C "$base/lib" --exclude="$ver/site-packages" --exclude="$ver/test" \
  --exclude="$ver/idlelib" --exclude="$ver/tkinter" --exclude="$ver/ensurepip" \
  --exclude="$ver/lib2to3" --exclude="$ver/distutils" --exclude="$ver/unittest/test" \
  --exclude="$ver/config-*" --exclude='__pycache__' -cf - "$ver" |
  tar -C "$stage/prefix/lib" -xf -
for pkg in numpy numpy.libs ale_py ale_py.libs gymnasium cloudpickle farama_notifications typing_extensions.py; do
  [ -e "$site/$pkg" ] || { echo "device-pack: $site has no $pkg" >&2; exit 1; }
  tar -C "$site" --exclude='__pycache__' --exclude='tests' -cf - "$pkg" |
    tar -C "$stage/venv/lib/$ver/site-packages" -xf -
done
# Their metadata too: Gymnasium looks packages up by distribution name.
for meta in "$site"/{numpy,ale_py,gymnasium,cloudpickle,farama_notifications,typing_extensions}-*.dist-info; do
  cp -a "$meta" "$stage/venv/lib/$ver/site-packages/"
done
tar -C "$stage" -cf - prefix venv | xz -T0 -6 >"$dest/python.tar.xz"
du -sh "$dest"/* | sed 's/^/device-pack: /'
du -sh "$dest" | sed 's/^/device-pack: in all /'
