#!/usr/bin/env bash
# `make check`'s type check: mypy --strict (pyproject.toml [tool.mypy]) on the synth-path packages this checkout
# changed (against HEAD, untracked files included); the whole synth path is checked by `make test`
# (tests/test_types.py). model_build, local_endpoint and tritonsm are not held to --strict (yet): not checked here.
set -euo pipefail
cd "$(dirname "$0")/.."
changed=$( { git diff --name-only HEAD; git ls-files --others --exclude-standard; } | grep -E '\.py$' || true)
targets=()
for package in deployment_spec triton_constructs stacks; do
  if grep -q "^$package/" <<<"$changed"; then targets+=("$package"); fi
done
if grep -qx "app.py" <<<"$changed"; then targets+=("app.py"); fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "types: no change on the synth path (deployment_spec, triton_constructs, stacks, app.py)"
  exit 0
fi
echo "types: mypy --strict on ${targets[*]}"
exec .venv/bin/python -m mypy "${targets[@]}"
