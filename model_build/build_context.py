"""What every backend's build gets besides its model: the spec, the cache folder, the log and the toolchain.

Made once per ``tritonsm build`` (model_build/build.py) and handed to the dispatcher, which hands
it to the backend that builds each model (model_build/dispatch.py).
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable

from deployment_spec import Spec
from deployment_spec.sections.model import ModelSpec


@dataclasses.dataclass(frozen=True)
class BuildContext:
    spec: Spec
    work: pathlib.Path
    log: Callable[[str], None]
    toolchain: Callable[[], object]  # lazily probes GPU/Docker (model_build.backends.tensorrt.gpu.detect)
    serving_torch: bool = False      # opt-in: run TorchScript in the torch release nearest the image's libtorch
    python_env_for: str = "image"    # Python-backend environments for the image, or "local" (tritonsm serve only)
    # model name -> the step in progress (progress.Step): an unexpected error names where it happened.
    steps: dict[str, str] = dataclasses.field(default_factory=dict)


def serving_devices(spec: Spec, model: ModelSpec) -> set[str]:
    """The devices the model's instances run on ("cuda", "cpu") over every endpoint and environment serving it."""
    from deployment_spec.sections.model import InstanceKind
    from deployment_spec.rules.variant_plan import serving_endpoints

    endpoints = serving_endpoints(spec)  # every environment's, and their variants' own builds
    kinds = {group.kind for group in model.instance_groups} or {InstanceKind.AUTO}
    out: set[str] = set()
    for endpoint in endpoints:
        if model.name not in {m.name for m in spec.served_models(endpoint)}:
            continue
        itype = endpoint.instance  # the table's facts, or those the spec declares (instance_facts)
        gpu = bool(itype and itype.is_gpu)
        for kind in kinds:
            out.add("cpu" if kind is InstanceKind.CPU or (kind is InstanceKind.AUTO and not gpu) else "cuda")
    return out
