#!/usr/bin/env bash
# cmx as a user installs it: the sdist, then the wheel built from that sdist (so a file the sdist forgets fails
# here), installed by README's install commands (a fresh venv, the cpu extra, not editable), then used from a
# folder that holds no checkout, with a fresh home (~/.cmx): the recipes come from the wheel. It runs what a new
# user runs first: cmx find, the tiny llama2 app (_short), packaging, and cmx check on the tree.
# `make test-install` runs it; CI runs it after `make test`. About 4 minutes here, most of it pip.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-.venv/bin/python}
case "$python" in /*) ;; */*) python="$repo/$python" ;; esac  # a path relative to the checkout (make passes one)
work=$(mktemp -d "${TMPDIR:-/tmp}/cmx-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { printf '\n--- %s\n' "$*"; }

step "build: the sdist, then the wheel from it"
"$python" -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
version=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import cmx; print(cmx.__version__)' "$repo")
wheel="$work/dist/cmx_bench-$version-py3-none-any.whl"
ls -l "$work/dist"
unzip -l "$wheel" | grep -q 'cmx/_recipes/app-mlperf-inference-llama2/recipe.yaml' \
  || { echo "the wheel holds no built-in recipes" >&2; exit 1; }

step "install: README's install commands, in a fresh home, with the wheel standing for the package index"
# pip finds cmx-bench in the build's folder until it is on the index; everything else from where it always does:
# the variable replaces pip's configured find-links (a CPU torch's wheelhouse, here), so those are kept in it,
# read before HOME changes (a user's pip.conf is in ~/.config/pip)
configured=$("$python" -m pip config list 2>/dev/null | sed -n "s/^[a-z:]*\.find-links='\(.*\)'$/\1/p" | tr '\n' ' ')
export PIP_FIND_LINKS="$work/dist ${configured}"
mkdir -p "$work/user" "$work/home"
cd "$work/user"
export HOME="$work/home"
unset CMX_HOME CMX_REGISTRY CMX_CACHE CMX_RUNS PYTHONPATH VIRTUAL_ENV
# the block README marks for this check: the commands a user types, run as typed (bash, stopping at a failure)
(cd "$repo" && "$python" - <<'PY') >"$work/install.sh"
import shlex
from pathlib import Path
from tests.docs.console import Block, Directive, items
found = items(Path("README.md").read_text(encoding="utf-8"))
marked = [b for d, b in zip(found, found[1:]) if isinstance(d, Directive) and isinstance(b, Block)
          and d.name == "skip" and d.argument.startswith("make test-install runs")]
assert len(marked) == 1, "README.md marks no install block (or several) for make test-install"
print("set -euo pipefail")
print("\n".join(f"echo {shlex.quote('$ ' + e.command)}\n{e.command}" for e in marked[0].examples()))
print('printf "%s\\n" "$(command -v cmx)" >"$HOME/.cmx-command"')
PY
bash "$work/install.sh"
cmx=$(cat "$HOME/.cmx-command")
where=$("$(dirname "$cmx")/python" -c 'import cmx; print(cmx.__file__)')
case "$where" in */site-packages/cmx/__init__.py) ;; *) echo "cmx was imported from $where, not from an installed wheel" >&2; exit 1 ;; esac
"$(dirname "$cmx")/python" -m pip show cmx-bench | grep -E "^(Name|Version|Location):"

step "cmx --version; cmx registry ls; cmx find"
"$cmx" --version
"$cmx" registry ls
"$cmx" find app mlperf

step "a recipe repository from git: cmx registry add writes ~/.cmx/registry.yaml, pinned to the commit"
git init -q "$work/extra"
mkdir -p "$work/extra/recipes/say-hello"
printf 'name: say-hello\nsummary: a recipe from a git source\ntags: [say, hello]\n' >"$work/extra/recipes/say-hello/recipe.yaml"
git -C "$work/extra" add -A
git -C "$work/extra" -c user.name=ci -c user.email=ci@localhost commit -qm "a recipe"
"$cmx" registry add extra "$work/extra"
grep -q "rev: $(git -C "$work/extra" rev-parse HEAD)" "$HOME/.cmx/registry.yaml"
"$cmx" find say hello | grep -q say-hello
"$cmx" registry ls

step "the tiny llama2 app, short, in a folder with no checkout"
"$cmx" run "app mlperf inference llama2 _cpu _tiny _short" --input results_dir=results --progress plain

step "packaging and checking the tree"
cp "$repo/docs/examples/system-demo.yaml" system.yaml  # the user's own system file
"$cmx" run "generate mlperf submission" --input results_dir=results --input out_dir=submission \
  --input submitter=cmx-install-check --input division=open --input system_file=system.yaml --input tar=true \
  --progress plain
"$cmx" check submission --expect loadgen.min-duration,loadgen.sample-count,accuracy.coverage
echo "install check: the wheel ran the tiny llama2 app, packaged and checked it, outside the checkout"
