"""Which GPU architecture a TensorRT plan is for: the serving endpoints' instance families (https://developer.nvidia.com/cuda-gpus and the EC2 accelerated-computing instance documentation)."""
from __future__ import annotations

from deployment_spec import Spec
from deployment_spec.sections.model import HardwareCompatibility, ModelSpec, TensorRTSettings
from deployment_spec.rules.variant_plan import endpoints_to_build
from model_build.errors import BuildError, ToolUnavailable


def check_target_gpus(spec: Spec, model: ModelSpec, local_cc: str) -> None:
    """A plan runs only on the GPU architecture it was built on (https://developer.nvidia.com/cuda-gpus and the EC2 accelerated-computing instance documentation): refuse a mismatch early."""
    level = (model.tensorrt or TensorRTSettings()).hardware_compatibility
    for ep in endpoints_to_build(spec).values():  # a variant's own build on its instance type too
        if model.name not in {m.name for m in spec.served_models(ep)}:
            continue
        itype = ep.instance  # the table's facts, or those the spec declares (instance_facts)
        target = itype.family.compute_capability if itype else None
        if target is None:
            continue
        if level is HardwareCompatibility.AMPERE_PLUS:
            if float(target) < 8.0:
                raise BuildError(f"models.{model.name}.tensorrt.hardware_compatibility: an ampere_plus plan does not "
                                 f"run on {ep.instance_type} (compute capability {target}) of endpoint {ep.name}; "
                                 "use none and build on that GPU")
        elif target != local_cc:
            raise ToolUnavailable(f"model {model.name}: endpoint {ep.name} runs on {ep.instance_type} (compute "
                                  f"capability {target}) but this machine's GPU has {local_cc}; a TensorRT plan only "
                                  f"loads on the architecture it was built on, build it on a {target} GPU")
