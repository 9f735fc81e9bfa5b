#!/usr/bin/env bash
# Create or reuse the project's virtual environment, from pinned requirements only.
#
# The environment (~9 GB) lives in a cache folder keyed by a hash of the pinned
# requirements, and .venv links to it, so clones on one machine share it; a machine with
# nothing on it builds it from scratch. Set ANPRED_VENV_CACHE to move the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
key=$(cat requirements/lock.txt | sha256sum | cut -c1-16)
cache=${ANPRED_VENV_CACHE:-$HOME/.cache/anpred/venvs}
target="$cache/$key"
if [ ! -f "$target/.ready" ]; then
  echo "setup: building the environment in $target (first time: about 4 minutes, 9 GB)"
  rm -rf "$target"
  mkdir -p "$cache"
  "$PY" -m venv "$target"
  "$target/bin/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  "$target/bin/python" -m pip install --quiet -r requirements/lock.txt 2>&1 \
    | grep -v '^WARNING: Location' || true
  "$target/bin/python" -m pip check >/dev/null 2>&1 || { "$target/bin/python" -m pip check; exit 1; }
  touch "$target/.ready"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$target" ]; then
  rm -rf .venv
  ln -s "$target" .venv
fi
# anpred itself: editable, pointing at this clone (cheap; redone when another clone took it).
# Installed through the real path so the console script does not depend on this clone.
here=$(pwd)
if ! .venv/bin/python -c "import anpred, sys; sys.exit(0 if anpred.__file__.startswith('$here/') else 1)" 2>/dev/null; then
  "$target/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e . 2>&1 \
    | grep -v '^WARNING: Location' || true
fi
echo "setup: .venv -> $target ready"
