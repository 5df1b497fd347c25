"""The spec app: one CDK stage per environment of a deployment spec, checked by cdk-nag, AWS Control Tower's rules
and Security Hub's SageMaker controls. This checkout runs it as ``python app.py`` (cdk.json); a user of the wheel as
``python -m triton_sagemaker_stacks`` in the folder of their cdk.json, or calls ``build_app`` from an app of their own.

Composes only. Context (``cdk synth -c spec=PATH -c manifest=PATH -c capacity=PATH``)
picks the spec (default ``triton.yaml``), the build manifest (default
``assets/manifest.json``, written by ``tritonsm build``) and the measured
capacity (default ``capacity.json``, optional); ``-c pool_manifests=a.json,b.json`` adds
builds made on other GPUs for the fallback instance pools the main build's TensorRT plans do
not run on; ``-c endpoints=a,b`` puts only
those endpoints' stacks in the assembly (the storage stacks always), and says
which it leaves out. A user mistake prints one error and exits 2, without a
traceback. Relative paths are the app folder's (where cdk.json is: the CDK CLI runs the app there).
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import aws_cdk as cdk
from aws_cdk import cx_api
from constructs import Construct
from cdk_nag import AwsSolutionsChecks

from deployment_spec import DEFAULT_SPEC, Spec, load_spec
from deployment_spec.parsing.errors import ProblemsError
from deployment_spec.cost.capacity import (DEFAULT_CAPACITY, CapacityError, Drain, Measurement, load_capacity,
                                           load_drains)
from deployment_spec.builds.manifest import DEFAULT_MANIFEST, Manifest, ManifestError, load_manifest
from triton_constructs import SynthError, control_tower, security_hub

from . import model_signatures
from .pipeline_stack import PipelineStack
from .stage import TritonStage

EXIT_BAD_INPUT = 2
# The warnings of the stages' stacks every synth prints itself (_stage_warnings), by acknowledgement id.
SHOWN_WARNINGS = (model_signatures.UNSIGNED,)


def cdk_json_context(root: pathlib.Path) -> dict[str, Any]:
    """The feature flags of ``root``'s cdk.json (none without one), so a plain ``python app.py`` synthesizes what
    ``cdk synth`` does."""
    path = root / "cdk.json"
    context: dict[str, Any] = json.loads(path.read_text()).get("context", {}) if path.is_file() else {}
    return context


def stage_id(spec: Spec, environment: str) -> str:
    """``TritonProd`` for project Triton, environment prod: select it with ``cdk deploy "TritonProd/*"``."""
    return f"{spec.project}{environment[:1].upper()}{environment[1:]}"


def selected_endpoints(spec: Spec, raw: object) -> list[str] | None:
    """The ``-c endpoints=a,b`` context as endpoint names (None: every endpoint); SynthError if one is unknown."""
    if raw is None:
        return None
    names = raw if isinstance(raw, list) else [n.strip() for n in str(raw).split(",") if n.strip()]
    unknown = [str(n) for n in names if n not in spec.endpoints]
    if unknown or not names:
        got = ", ".join(repr(n) for n in unknown) if unknown else "no endpoint"
        raise SynthError(f"-c endpoints={raw}", [
            f"got {got}; allowed: endpoints of {spec.path.name}: {', '.join(spec.endpoints)}; give a "
            f"comma-separated list, e.g. -c endpoints={next(iter(spec.endpoints))}, or leave it out for all"])
    return [str(n) for n in names]


def build_app(spec: Spec, manifest: Manifest, manifest_path: pathlib.Path, *,
              capacity: dict[str, Measurement] | None = None, drains: dict[str, Drain] | None = None,
              app: cdk.App | None = None,
              endpoints: list[str] | None = None, spec_file: str | None = None,
              pipeline_only: bool = False, pool_manifests: dict[pathlib.Path, Manifest] | None = None,
              root: pathlib.Path | None = None) -> cdk.App:
    """Adds one stage per environment and the checks (cdk-nag, Control Tower, Security Hub) to ``app``.

    ``capacity`` and ``drains``: capacity.json's load and drain measurements, for the scaling targets a spec
    leaves out. ``endpoints`` limits the endpoint stacks to those names (None: all); storage stacks are always there.
    ``spec_file`` is the spec's path in the repository, which the pipeline's steps read (default: ``spec.path``
    relative to ``root``, the app's folder: where its cdk.json is, the current directory by default).
    ``pipeline_only``: only the pipeline stack, without stages, for its first
    deploy from a machine that cannot build every model; its first run's self-mutation adds the stages.
    """
    root = root or pathlib.Path.cwd()
    app = app or cdk.App(context=cdk_json_context(root))
    PipelineStack.check(spec)

    def make_stage(scope: Construct, name: str) -> TritonStage:
        stage = TritonStage(scope, stage_id(spec, name), spec=spec, environment=spec.environments[name],
                            manifest=manifest, manifest_path=manifest_path, capacity=capacity or {},
                            drains=drains or {}, endpoints=endpoints, pool_manifests=pool_manifests)
        # AWS Control Tower's proactive controls as cfn-guard rules (what a landing zone's hooks refuse at deploy),
        # on what a stage deploys into the workload accounts; the delivery pipeline's own stack (CDK Pipelines'
        # generated resources, in the tooling account) is not checked against them.
        cdk.Validations.of(stage).add_plugins(control_tower.validator())
        return stage

    if pipeline_only and spec.pipeline is None:
        raise SynthError("pipeline_only", [f"-c pipeline_only=true, but {spec.path.name} has no pipeline: section; "
                                           "add one (docs/operations/pipeline.md) or leave the option out"])
    for name in ([] if pipeline_only else spec.environments):
        make_stage(app, name)
    if spec.pipeline is not None:
        # The same stages again, deployed in order by the pipeline (cdk deploy <Project>Pipeline, once).
        PipelineStack(app, f"{spec.project}Pipeline", stack_name=f"{spec.project}-Pipeline", spec=spec,
                      spec_file=spec_file or _repository_path(spec, root), make_stage=make_stage,
                      with_stages=not pipeline_only)
    # cdk-nag's AwsSolutions pack and Security Hub's SageMaker controls (and the stages' Control Tower rules,
    # above): synth fails on any finding not acknowledged with a reason.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), security_hub.checks())
    return app


def _repository_path(spec: Spec, root: pathlib.Path) -> str:
    """The spec as the pipeline's checkout sees it: relative to the repository root, a clone of this project (the
    pipeline's steps run its `make setup` and `.venv/bin/tritonsm`: stacks/pipeline_commands.py)."""
    if not (root / "Makefile").is_file() or not (root / "scripts" / "bootstrap.sh").is_file():
        raise SynthError("pipeline", [
            f"{spec.path.name} has a pipeline: section, whose steps run this project's `make setup` and "
            f"`.venv/bin/tritonsm` in a clone of its repository, and {root} is not one (no Makefile and "
            "scripts/bootstrap.sh); synthesize the pipeline from a clone (docs/howto/install.md, way 1), or remove "
            "pipeline: and deploy the stages from your own pipeline"])
    try:
        return spec.path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise SynthError("pipeline", [f"the spec {spec.path} is outside this repository ({root}); the pipeline "
                                      "builds from the repository, so commit the spec under it and pass that "
                                      "path"]) from None


def main(root: pathlib.Path) -> int:
    """``cdk synth``'s entry point for the app folder ``root`` (where cdk.json is); the exit status."""
    app = cdk.App(context=cdk_json_context(root))
    spec_path = pathlib.Path(app.node.try_get_context("spec") or DEFAULT_SPEC)
    manifest_path = pathlib.Path(app.node.try_get_context("manifest") or DEFAULT_MANIFEST)
    capacity_path = pathlib.Path(app.node.try_get_context("capacity") or DEFAULT_CAPACITY)
    try:
        spec = load_spec(spec_path)
        endpoints = selected_endpoints(spec, app.node.try_get_context("endpoints"))
        pipeline_only = str(app.node.try_get_context("pipeline_only") or "").lower() in ("1", "true", "yes")
        # The stages are what needs the built models; without them no manifest is read.
        manifest = Manifest(spec.triton_version, {}, {}) if pipeline_only else load_manifest(manifest_path)
        pools = {pathlib.Path(p.strip()): load_manifest(pathlib.Path(p.strip()))
                 for p in str(app.node.try_get_context("pool_manifests") or "").split(",") if p.strip()}
        capacity = load_capacity(capacity_path)
        build_app(spec, manifest, manifest_path, capacity=capacity,
                  drains=load_drains(capacity_path), app=app, endpoints=endpoints,
                  pipeline_only=pipeline_only, pool_manifests=pools, root=root)
    # ProblemsError: the spec's (SpecError) and the constructs' props (PropsError, e.g. a stale build).
    except (ProblemsError, ManifestError, CapacityError, SynthError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    assembly = app.synth()
    _stage_warnings(assembly)
    _cost_report(spec, capacity, pathlib.Path(assembly.directory))
    if endpoints is not None:
        _announce_left_out(spec, endpoints)
    return 0


def _stage_warnings(assembly: cx_api.CloudAssembly) -> None:
    """The stages' warnings that ``cdk synth`` would not show, on stderr like the cost lines.

    Without a stack pattern the CDK CLI reports the annotations of the top-level stacks only (aws-cdk's
    ``selectTopLevelOrMatchingStacks``), and every stack of a stage sits in the stage's nested assembly: a plain
    ``cdk synth`` (or ``--quiet``) printed none of them. Each is printed once per stage and stack, though the
    pipeline's copy of a stage repeats it.
    """
    seen: set[tuple[str, str]] = set()
    for stack in assembly.stacks_recursively:
        where = "/".join(stack.hierarchical_id.split("/")[-2:])  # <stage>/<stack>, a pipeline's prefix left out
        for message in stack.messages:
            text = str(message.entry.data)
            if message.level != cx_api.SynthesisMessageLevel.WARNING or not any(
                    f"[ack: {ack}]" in text for ack in SHOWN_WARNINGS) or (where, text) in seen:
                continue
            seen.add((where, text))
            print(f"warning: {where}: {text}", file=sys.stderr)


def _cost_report(spec: Spec, capacity: dict[str, Measurement], assembly: pathlib.Path) -> None:
    """What each stage costs per month (deployment_spec.cost.figures): one line per stage on stderr, the whole report beside
    the assembly (cost-report.txt), so every synth and `cdk diff` shows it and CI can keep it."""
    from deployment_spec.cost import figures as cost, report as cost_report, pricing
    try:
        costs = cost.spec_costs(spec.environments, pricing.load_prices(spec.root), capacity)
    except pricing.PricesError as exc:
        print(f"note: no cost report: {exc}", file=sys.stderr)
        return
    lines = cost_report.report(costs)
    (assembly / "cost-report.txt").write_text("\n".join(lines) + "\n")
    for stage in costs.values():
        print(f"cost: {cost_report.stage_line(stage)}", file=sys.stderr)
    print(f"cost: the whole report, per endpoint and with its assumptions: {assembly / 'cost-report.txt'}",
          file=sys.stderr)


def _announce_left_out(spec: Spec, endpoints: list[str]) -> None:
    """Never drop an endpoint silently: name what this assembly leaves out, and what that means."""
    left_out = [name for name in spec.endpoints if name not in endpoints]
    if left_out:
        print(f"note: -c endpoints={','.join(endpoints)}: this cloud assembly leaves out the stacks of "
              f"endpoint(s) {', '.join(left_out)} in every environment. A stack left out is neither diffed nor "
              "deployed, and never deleted: cdk deploy acts only on the stacks it is given", file=sys.stderr)

