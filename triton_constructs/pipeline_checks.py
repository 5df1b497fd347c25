"""Synth-time refusals for the delivery pipeline: what would fail only after a GPU build and a deploy.

A TensorRT plan runs only on the GPU architecture (compute capability) it was built on
(https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/advanced.html, "Hardware
Compatibility"), so the pipeline's build GPU must match every stage's endpoint GPU that serves one.
"""
from __future__ import annotations

from typing import Optional

from deployment_spec import Spec
from deployment_spec.facts import instances
from deployment_spec.sections.model import Backend, HardwareCompatibility
from deployment_spec.sections.pipeline import ON_DEMAND_GPU, PipelineSpec
from deployment_spec.rules.cross_section import served_models


def gpu_problems(spec: Spec, pipeline: PipelineSpec) -> list[str]:
    """One problem per TensorRT model whose endpoint, in some pipeline stage, has another GPU than the build."""
    compute = pipeline.build_compute
    built = compute.gpu
    out: list[str] = []
    for stage in pipeline.stages:
        for endpoint in spec.environments[stage].endpoints.values():
            itype = endpoint.instance
            target = itype.family if itype else None
            for model in served_models(endpoint, spec.models):
                if model.backend is not Backend.TENSORRT or built is None:
                    continue
                target_cc = target.compute_capability if target else None
                mode = model.tensorrt.hardware_compatibility if model.tensorrt else HardwareCompatibility.NONE
                built_cc = built.compute_capability
                if target_cc and mode.builds_on(built_cc) and mode.plan_runs(built_cc, target_cc):
                    continue
                gpu = (f"NVIDIA {target.gpu}, compute capability {target_cc}" if target and target_cc else "no GPU")
                problem = (f"model '{model.name}' (backend tensorrt) of endpoint '{endpoint.name}' runs on "
                           f"{endpoint.instance_type} ({gpu}) in stage '{stage}', but pipeline.build_compute "
                           f"{compute.describe()} builds its plan, which runs only on the GPU architecture it was "
                           f"built on; {_fix(itype, target_cc)}")
                if problem not in out:
                    out.append(problem)
    return out


def _fix(itype: Optional[instances.InstanceType], target_cc: Optional[str]) -> str:
    if itype is None or target_cc is None:
        return "serve TensorRT plans on a GPU instance type, or change the model's backend"
    for kind, family in ON_DEMAND_GPU.items():
        if instances.FAMILIES[family].compute_capability == target_cc:
            return f"set pipeline.build_compute to {{kind: {kind.value}}} (on-demand CodeBuild with an NVIDIA " \
                   f"{instances.FAMILIES[family].gpu})"
    fleet = f"{itype.family_name}.{'xlarge' if itype.family_name.startswith('g') else itype.size}"
    return (f"no on-demand CodeBuild GPU compute has an NVIDIA {itype.family.gpu} (gpu-small: A10G, gpu-large: "
            f"Tesla V100): set pipeline.build_compute to {{kind: fleet, instance_type: {fleet}}}, a reserved-capacity "
            "fleet of that GPU (billed while it exists; CodeBuild accepts only some instance types: "
            "https://docs.aws.amazon.com/codebuild/latest/userguide/fleets.html), or build on such a host and "
            "deploy by hand")
