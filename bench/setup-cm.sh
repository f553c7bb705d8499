#!/usr/bin/env bash
# Set up MLCommons CM (cmind) with its script repository, from PyPI alone, for bench/plan_speed.py --cm.
#
#   bench/setup-cm.sh                 # into /tmp/cm-bench
#   bench/setup-cm.sh /some/dir       # anywhere outside this checkout
#   PYTHON=/path/to/python3 bench/setup-cm.sh   # the interpreter the virtualenv is made from
#
# What a user does with GitHub is `pip install cmind; cm pull repo mlcommons@cm4mlops`: a git clone under
# $CM_REPOS/repos/ registered in $CM_REPOS/repos.json. GitHub is not needed here: the wheel cmx4mlops (on
# PyPI) carries the same script repository (cmr.yaml, automation/script, script/get-python3, ...). This
# script unpacks it under $DIR/cm-repos/repos/ and registers it with CM's own command, `cm add repo
# --path=...`, in a private CM home (CM_REPOS=$DIR/cm-repos), so ~/CM is never touched. The cmx4mlops wheel
# is not pip-installed: cmind would also pick up any installed `cm*` package with a cmr.yaml as a repo, and
# the checkout registered by path is what `cm pull repo` leaves.
#
# It then runs `cm run script --tags=get,python3 --quiet` twice and checks that CM's cache holds the entry
# (`cm show cache --tags=get,python3`) and that the second run loaded it instead of detecting again.
# Exits non-zero on any failure.
set -euo pipefail

DIR=${1:-/tmp/cm-bench}
PYTHON=${PYTHON:-python3}
CMIND_VERSION=${CMIND_VERSION:-4.2.0}
CMX4MLOPS_VERSION=${CMX4MLOPS_VERSION:-1.0.1}

here=$(cd "$(dirname "$0")/.." && pwd -P)
DIR=$(realpath -m "$DIR")  # checked before anything is made there
case "$DIR/" in
  "$here"/*) echo "setup-cm: $DIR is inside this checkout ($here); give a folder outside it" >&2; exit 2 ;;
esac
mkdir -p "$DIR"

echo "setup-cm: virtualenv $DIR (from $($PYTHON -c 'import sys; print(sys.executable, sys.version.split()[0])'))"
"$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install --quiet --disable-pip-version-check "cmind==$CMIND_VERSION"

dl="$DIR/download"
mkdir -p "$dl"
"$DIR/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
  "cmx4mlops==$CMX4MLOPS_VERSION" -d "$dl"
wheel=$(ls "$dl"/cmx4mlops-"$CMX4MLOPS_VERSION"-*.whl)

export CM_REPOS="$DIR/cm-repos"
repo="$CM_REPOS/repos/mlcommons@cmx4mlops"
if [ -d "$repo" ]; then
  echo "setup-cm: $repo exists; kept (delete $CM_REPOS to start over)"
else
  # the wheel's cmx4mlops/ folder is the repository: cmr.yaml (alias cmx4mlops, prefix repo) and repo/
  "$DIR/bin/python" - "$wheel" "$repo" <<'PY'
import sys, zipfile
from pathlib import Path
wheel, dest = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("cmx4mlops/") and not n.endswith("/")]
    for n in names:
        target = dest / n[len("cmx4mlops/"):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(n))
    print(f"setup-cm: unpacked {len(names)} files of {Path(wheel).name} into {dest}")
PY
fi
cm="$DIR/bin/cm"
if ! grep -q "mlcommons@cmx4mlops" "$CM_REPOS/repos.json" 2>/dev/null; then
  "$cm" add repo --path="$repo"
fi
"$cm" list repo
grep -q "mlcommons@cmx4mlops" "$CM_REPOS/repos.json" \
  || { echo "setup-cm: $repo is not in $CM_REPOS/repos.json after cm add repo" >&2; exit 1; }

echo "setup-cm: first run (detects Python, fills CM's cache)"
"$cm" run script --tags=get,python3 --quiet >"$DIR/first-run.log" 2>&1 \
  || { tail -30 "$DIR/first-run.log" >&2; exit 1; }
echo "setup-cm: second run (must load CM's cache)"
"$cm" run script --tags=get,python3 --quiet -v >"$DIR/second-run.log" 2>&1 \
  || { tail -30 "$DIR/second-run.log" >&2; exit 1; }
"$cm" show cache --tags=get,python3 | tee "$DIR/cache.txt"
grep -q "Path:" "$DIR/cache.txt" \
  || { echo "setup-cm: cm show cache --tags=get,python3 lists no entry" >&2; exit 1; }
grep -q "Found cached script output" "$DIR/second-run.log" \
  || { echo "setup-cm: the second run did not use CM's cache (see $DIR/second-run.log)" >&2; exit 1; }
grep "Found cached script output\|cm-cached-state.json" "$DIR/second-run.log" | sed 's/^/  /'

cat >"$DIR/env.sh" <<EOF
export CM_REPOS=$CM_REPOS
EOF
echo
echo "setup-cm: ready. CM's cached run:  CM_REPOS=$CM_REPOS $cm run script --tags=get,python3 --quiet"
echo "setup-cm: side by side with cmx:   .venv/bin/python bench/plan_speed.py --cm $cm"
