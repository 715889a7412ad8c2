#!/usr/bin/env bash
# Creates (or updates) the venv Python environments run in: .venv at the
# repository root, with scripts/python-requirements.txt from PyPI.
#   scripts/python-env.sh            then   export VIRTUAL_ENV=$PWD/.venv
# Env: SEBULBA_VENV (default .venv), PYTHON (default python3; must be the
# Python the binary was built against, 3.11 here).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${SEBULBA_VENV:-.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r scripts/python-requirements.txt
"$venv/bin/python" -c "import gymnasium, mujoco; print('venv', '$venv', 'gymnasium', gymnasium.__version__, 'mujoco', mujoco.__version__)"
