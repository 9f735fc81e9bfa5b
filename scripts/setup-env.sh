#!/usr/bin/env bash
# Create or reuse the project's virtual environment, from pinned requirements only.
#
# The libraries (~9 GB) live in a shared cache folder keyed by a hash of the pinned
# requirements, so clones on one machine build them once; a machine with nothing on it
# builds them from scratch. Set ANPRED_VENV_CACHE to move the cache.
#
# Each clone gets its own small .venv: the cached libraries are added to its path by a
# .pth file, and anpred is installed there in editable mode, pointing at this clone. So
# whatever other clones do with the cache, this clone's .venv imports this clone's code.
# Nothing of anpred is ever installed into the shared cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
key=$(cat requirements/lock.txt | sha256sum | cut -c1-16)
cache=${ANPRED_VENV_CACHE:-$HOME/.cache/anpred/venvs}
target="$cache/$key"
quiet() { grep -v '^WARNING: Location' || true; }
if [ ! -f "$target/.ready" ]; then
  echo "setup: building the environment in $target (first time: about 4 minutes, 9 GB)"
  rm -rf "$target"
  mkdir -p "$cache"
  "$PY" -m venv "$target"
  "$target/bin/python" -m pip install --quiet --upgrade pip 2>&1 | quiet
  "$target/bin/python" -m pip install --quiet -r requirements/lock.txt 2>&1 | quiet
  "$target/bin/python" -m pip check >/dev/null 2>&1 || { "$target/bin/python" -m pip check; exit 1; }
  touch "$target/.ready"
fi
# Caches made by older versions of this script had anpred installed in them: take it out.
if "$target/bin/python" -m pip show -q anpred >/dev/null 2>&1; then
  "$target/bin/python" -m pip uninstall -y -q anpred 2>&1 | quiet
fi
here=$(pwd)
libs=$("$target/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
site_of() { "$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
ok=0
if [ -d .venv ] && [ ! -L .venv ] && [ -f ".venv/.anpred-env-$key" ] \
  && .venv/bin/python -c "import anpred, sys; sys.exit(0 if anpred.__file__.startswith('$here/') else 1)" 2>/dev/null
then
  ok=1
fi
if [ "$ok" = 0 ]; then
  rm -rf .venv
  base=$("$target/bin/python" -c "import sys; print(sys._base_executable)")
  "$base" -m venv --without-pip .venv
  echo "import site; site.addsitedir('$libs')" > "$(site_of .venv)/anpred-env.pth"
  .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e . 2>&1 | quiet
  touch ".venv/.anpred-env-$key"
fi
echo "setup: .venv (this clone's code) + libraries from $target ready"
# Deployment runtimes (one pinned environment per requirements/runtimes/<env>.txt, 13 GB
# in all) are not built here: `make runtimes` builds them (scripts/setup-runtimes.sh). This
# only records those already in the cache, so that a rebuilt .venv still finds them.
if [ -f scripts/setup-runtimes.sh ]; then
  ANPRED_RUNTIMES=none bash scripts/setup-runtimes.sh
fi
