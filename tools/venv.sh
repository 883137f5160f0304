#!/usr/bin/env bash
# Note: the Python environment lives outside the clone, keyed by a hash of requirements.txt, so a
# fresh CI clone reuses it instead of reinstalling PyTorch. `.venv` in the clone is a link to it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req="$root/requirements.txt"
hash=$(sha256sum "$req" | cut -c1-16)
base=${FLOW_VENV_ROOT:-$HOME/.cache/flow-venvs}
venv="$base/$hash"
py=${PYTHON:-python3}
if [ ! -f "$venv/.complete" ]; then
  echo "[flow] creating Python environment $venv (first time only)"
  rm -rf "$venv"
  mkdir -p "$base"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$req"
  touch "$venv/.complete"
fi
if [ "$(readlink "$root/.venv" 2>/dev/null)" != "$venv" ]; then
  rm -rf "$root/.venv"
  ln -s "$venv" "$root/.venv"
fi
