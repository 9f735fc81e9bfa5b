#!/usr/bin/env bash
# Build the pinned environments of the deployment runtimes (`make runtimes`: all of them;
# `make runtime NAME=<environment>`: one). `make env` only records those already built.
#
# One environment per lock file requirements/runtimes/<env>.txt, in the shared cache as
# $cache/rt-<env>-<16 hex digits of the lock's SHA-256>, marked done by a .ready file, and
# skipped quietly when it is already built. A lock is a full lock: installed with --no-deps
# (nothing outside it gets in) and checked with `pip check`. anpred itself is never
# installed into it: a worker finds this clone's code on PYTHONPATH (anpred sets it).
#
# Where each environment's Python is goes to a JSON record that anpred reads
# (anpred.library.environments): by default .venv/anpred-runtimes.json of this clone.
# Every call rewrites it with every environment of this clone's lock files that is built.
#
# Variables: ANPRED_VENV_CACHE (the cache, as for the main environment), PYTHON (the base
# Python), ANPRED_RUNTIME_LOCKS (folder of the lock files), ANPRED_RUNTIME_ENVS (the JSON
# record), ANPRED_RUNTIMES: `all` (or empty) builds every lock file's environment, a comma
# list builds those (a name without a lock file is refused, exit 2), `none` builds none and
# only records the built ones (what setup-env.sh runs). A runtime whose environment fails
# to build is reported and left out, the others and the main environment are unaffected;
# the exit status is 1 when an environment named in the list failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
cache=${ANPRED_VENV_CACHE:-$HOME/.cache/anpred/venvs}
locks=${ANPRED_RUNTIME_LOCKS:-requirements/runtimes}
record=${ANPRED_RUNTIME_ENVS:-.venv/anpred-runtimes.json}
wanted=${ANPRED_RUNTIMES:-all}
quiet() { grep -v -e '^WARNING: Location' -e 'is neither a file nor a directory' || true; }
shopt -s nullglob
known=()
for lock in "$locks"/*.txt; do known+=("$(basename "$lock" .txt)"); done
if [ "$wanted" != all ] && [ "$wanted" != none ]; then
  for name in ${wanted//,/ }; do
    if [[ ! "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || [ ! -f "$locks/$name.txt" ]; then
      # a runtime's name instead of its environment's: the lock whose header names it
      # (as `name`, or as "name (converter ...)")
      home=()
      for lock in "$locks"/*.txt; do
        if [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] \
          && sed -n '/^#/!q;p' "$lock" | grep -qE -- "(\`$name\`|(^|[ (])$name \()"; then
          home+=("$(basename "$lock" .txt)")
        fi
      done
      hint="environments: ${known[*]:-none} (\`anpred libs\` shows each runtime's)"
      if [ ${#home[@]} = 1 ]; then
        hint="$name is built in environment ${home[0]}: make runtime NAME=${home[0]}"
      fi
      echo "setup: no runtime environment named '$name' (no $locks/$name.txt); $hint" >&2
      exit 2
    fi
  done
fi
mkdir -p "$cache" "$(dirname "$record")"
entries=()
failed=()
missing=()
for lock in "$locks"/*.txt; do
  name=$(basename "$lock" .txt)
  key=$(sha256sum < "$lock" | cut -c1-16)
  target="$cache/rt-$name-$key"
  build=1
  if [ "$wanted" = none ] || { [ "$wanted" != all ] && [[ ",$wanted," != *",$name,"* ]]; }; then
    build=0  # not asked for: recorded if it is built already, never built here
  fi
  if [ "$build" = 1 ] && [ ! -f "$target/.ready" ]; then
    exec 9>"$target.lock"
    flock 9  # another clone may be building the same environment
    if [ ! -f "$target/.ready" ]; then
      echo "setup: building the $name runtime environment in $target"
      log="$cache/rt-$name-$key.log"
      if { rm -rf "$target" && "$PY" -m venv "$target" \
        && "$target/bin/python" -m pip install --no-deps -r "$lock" \
        && "$target/bin/python" -m pip check; } >"$log" 2>&1; then
        touch "$target/.ready"
      else
        quiet < "$log" | tail -5
        echo "setup: the $name runtime environment failed to build (log: $log)"
        failed+=("$name")
      fi
    fi
    exec 9>&-
  fi
  if [ -f "$target/.ready" ]; then
    site=$("$target/bin/python" -c "import sysconfig as s, json; p = s.get_paths(); print(json.dumps(sorted({p['purelib'], p['platlib']})))")
    entries+=("\"$name\": {\"python\": \"$target/bin/python\", \"prefix\": \"$target\", \"lock\": \"$key\", \"site\": $site}")
  else
    missing+=("$name")
  fi
done
body=$(IFS=,; echo "${entries[*]:-}")
printf '{%s}\n' "$body" | "$PY" -c "import json, sys; print(json.dumps(json.load(sys.stdin), indent=1))" > "$record.tmp"
mv "$record.tmp" "$record"
if [ ${#entries[@]} -gt 0 ]; then
  echo "setup: runtime environments ready: $(IFS=' '; for e in "${entries[@]}"; do printf '%s ' "${e%%\": *}"; done | tr -d '"')"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "setup: not built (their runtimes stay unavailable): ${failed[*]}"
  if [ "$wanted" != all ]; then
    exit 1
  fi
elif [ "$wanted" = none ] && [ ${#missing[@]} -gt 0 ]; then
  echo "setup: deployment-runtime environments not built: ${missing[*]} (\`make runtimes\` builds them, \`make runtime NAME=<environment>\` one; docs/runtimes.md)"
fi
