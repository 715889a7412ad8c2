#!/usr/bin/env bash
# Creates (or updates) the venvs:
#   .venv        Python environments run in (scripts/python-requirements.txt)
#   .venv-tools  what tests check sebulba's outputs with: TensorBoard's event
#                reader, kubernetes-validate, an MLflow server
#                (scripts/tool-requirements.txt)
#   scripts/python-env.sh            then   export VIRTUAL_ENV=$PWD/.venv
# Env: SEBULBA_VENV (default .venv), SEBULBA_TOOLS_VENV (default .venv-tools),
# PYTHON (default python3; must be the Python the binary was built against,
# 3.11 here).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${SEBULBA_VENV:-.venv}"
tools="${SEBULBA_TOOLS_VENV:-.venv-tools}"
python="${PYTHON:-python3}"
for v in "$venv" "$tools"; do
  if [ ! -x "$v/bin/python" ]; then
    "$python" -m venv "$v"
  fi
done
"$venv/bin/pip" install -q --disable-pip-version-check -r scripts/python-requirements.txt
"$venv/bin/python" -c "import gymnasium, mujoco; print('venv', '$venv', 'gymnasium', gymnasium.__version__, 'mujoco', mujoco.__version__)"
"$tools/bin/pip" install -q --disable-pip-version-check -r scripts/tool-requirements.txt
"$tools/bin/python" -c "import tensorboard, kubernetes_validate; print('venv', '$tools', 'tensorboard', tensorboard.__version__)"
