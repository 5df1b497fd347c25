"""The commands each pipeline step runs, written once: the pipeline stack uses them, and
docs/operations/pipeline.md shows the same lines (tests/infra/test_pipeline.py compares them).

They are the README's own commands (``make setup``, ``tritonsm build``, ``cdk synth``) with the
pipeline's spec (``$TRITONSM_SPEC``) and the build's output folder; nothing runs only in the pipeline.
"""
from __future__ import annotations

from typing import Collection

SPEC_VARIABLE = "TRITONSM_SPEC"
BUILD_OUTPUT = "build-output"      # the GPU build's tarballs + manifest.json; an additional input of later steps
EXPECTED = f"{BUILD_OUTPUT}/expected"  # each endpoint's answers in its own image on the build GPU
LOAD_OUTPUT = "load-results"       # the measured capacity record of the post-deploy load test

# GPU build: every model of the spec, or fail (--require-all: a pipeline must not ship a partial build).
BUILD_COMMANDS = (
    "make setup",
    f'.venv/bin/tritonsm build --spec "${SPEC_VARIABLE}" --out {BUILD_OUTPUT} --require-all',
    # The outputs the staging smoke test compares with: every endpoint, TensorRT ones included, in its own
    # sagemaker-tritonserver image on the build GPU (pulled from the pipeline region's registry).
    f'.venv/bin/tritonsm smoke --spec "${SPEC_VARIABLE}" --manifest {BUILD_OUTPUT}/manifest.json --image '
    f"--record-dir {EXPECTED}",
)
# Synth: the whole app (every stage and this pipeline, cdk-nag on all of them) from the build's manifest.
SYNTH_COMMANDS = (
    "make setup",
    f'.venv/bin/cdk synth --quiet -c spec="${SPEC_VARIABLE}" -c manifest={BUILD_OUTPUT}/manifest.json',
)


def verify_commands(environment: str) -> list[str]:
    """Before a stage deploys: every tarball it deploys matches the build manifest's sha256 and carries valid
    signatures by the spec's signing.public_key (docs/howto/signing.md); a failure stops the stage."""
    return ["make setup", f'.venv/bin/tritonsm verify --signatures --spec "${SPEC_VARIABLE}" --environment '
            f"{environment} --manifest {BUILD_OUTPUT}/manifest.json"]


def post_deploy_commands(environment: str, endpoints: list[str], *, phase_seconds: int,
                         concurrency: tuple[int, ...], asynchronous: Collection[str] = ()) -> list[str]:
    """Smoke test of every endpoint (each model of a multi-model endpoint), then a bounded load test
    whose max RPS within the latency SLA goes into the capacity record (``load-results/capacity.json``).
    ``asynchronous`` endpoints get the smoke test only (through S3): the load test sends InvokeEndpoint, which they
    do not take, and their scaling target comes from a drain rate (`tritonsm bench drain`)."""
    common = f'--spec "${SPEC_VARIABLE}" --environment {environment} --manifest {BUILD_OUTPUT}/manifest.json'
    out = ["make setup", f"mkdir -p {LOAD_OUTPUT}"]
    out += [f".venv/bin/tritonsm smoke {name} {common} --deployed --expected-dir {EXPECTED}" for name in endpoints]
    levels = ",".join(str(c) for c in concurrency)
    out += [f'.venv/bin/tritonsm bench --spec "${SPEC_VARIABLE}" load --endpoint {name} --deployed '
            f"--environment {environment} --manifest {BUILD_OUTPUT}/manifest.json --concurrency {levels} "
            f"--phase-seconds {phase_seconds} --record {name} --capacity {LOAD_OUTPUT}/capacity.json "
            f"--out {LOAD_OUTPUT}/{name}" for name in endpoints if name not in asynchronous]
    return out
