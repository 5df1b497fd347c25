"""Facts about SageMaker instance types that decide what a spec may ask for.

Sources: https://developer.nvidia.com/cuda-gpus and the EC2 accelerated-computing instance documentation (GPU per family, compute capability; local NVMe
storage: no KmsKeyId, no VolumeSizeInGB), §9 (multi-model endpoints on GPU).
"""
from __future__ import annotations

import dataclasses
import re

_TYPE = re.compile(r"ml\.([a-z0-9-]+)\.([0-9]*x?large|[a-z]+)")


@dataclasses.dataclass(frozen=True)
class Family:
    gpu: str | None                    # GPU model, None for CPU families
    compute_capability: str | None     # e.g. "8.6"
    gpus: dict[str, int]               # GPUs per size; sizes not listed have 1 (GPU) / 0 (CPU)
    nvme: bool                         # local NVMe instance storage
    mme: bool                          # listed for multi-model endpoints
    burstable: bool = False


_G5_SIZES = {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
FAMILIES: dict[str, Family] = {
    "g4dn": Family("T4", "7.5", {"12xlarge": 4}, nvme=True, mme=True),
    "g5": Family("A10G", "8.6", _G5_SIZES, nvme=True, mme=True),
    "g6": Family("L4", "8.9", _G5_SIZES, nvme=True, mme=False),
    "g6e": Family("L40S", "8.9", _G5_SIZES, nvme=True, mme=False),
    "p3": Family("V100", "7.0", {"8xlarge": 4, "16xlarge": 8}, nvme=False, mme=True),
    "p4d": Family("A100", "8.0", {"24xlarge": 8}, nvme=True, mme=False),
    "p5": Family("H100", "9.0", {"48xlarge": 8}, nvme=True, mme=False),
    "c5": Family(None, None, {}, nvme=False, mme=True),
    "c5d": Family(None, None, {}, nvme=True, mme=True),
    "c6i": Family(None, None, {}, nvme=False, mme=True),
    "m5": Family(None, None, {}, nvme=False, mme=True),
    "m5d": Family(None, None, {}, nvme=True, mme=True),
    "m6i": Family(None, None, {}, nvme=False, mme=True),
    "r5": Family(None, None, {}, nvme=False, mme=True),
    "t2": Family(None, None, {}, nvme=False, mme=False, burstable=True),
    "t3": Family(None, None, {}, nvme=False, mme=False, burstable=True),
}
SIZES = ("medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
         "24xlarge", "48xlarge")


@dataclasses.dataclass(frozen=True)
class InstanceType:
    name: str
    family_name: str
    size: str
    family: Family

    @property
    def gpu_count(self) -> int:
        default = 1 if self.family.gpu else 0
        return self.family.gpus.get(self.size, default)

    @property
    def is_gpu(self) -> bool:
        return self.family.gpu is not None


def lookup(name: str) -> InstanceType | None:
    """The facts for ``name`` (e.g. ``ml.g5.xlarge``), or None if the family is unknown here."""
    m = _TYPE.fullmatch(name)
    if not m or m.group(1) not in FAMILIES or m.group(2) not in SIZES:
        return None
    return InstanceType(name, m.group(1), m.group(2), FAMILIES[m.group(1)])


def known_families() -> str:
    return ", ".join(FAMILIES)


# Local NVMe instance store per size, in GB, where an endpoint's model data and the Python
# backend's unpacked environments live (EC2 "Instance store specifications" of the accelerated
# computing types: https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_instance-store).
# Sizes or families not listed are not checked.
INSTANCE_STORE_GB: dict[str, dict[str, int]] = {
    "g4dn": {"xlarge": 125, "2xlarge": 225, "4xlarge": 225, "8xlarge": 900, "12xlarge": 900, "16xlarge": 900},
    "g5": {"xlarge": 250, "2xlarge": 450, "4xlarge": 600, "8xlarge": 900, "12xlarge": 3800, "16xlarge": 1900,
           "24xlarge": 3800, "48xlarge": 7600},
}


def instance_store_gb(name: str) -> int | None:
    found = lookup(name)
    return INSTANCE_STORE_GB.get(found.family_name, {}).get(found.size) if found else None


# vCPUs and memory (GiB) per size: what an inference component's reservation must fit in
# (NumberOfCpuCoresRequired, MinMemoryRequiredInMb; CreateInferenceComponent API reference). From the EC2
# instance type specifications, which the ml.* types share: accelerated computing
# https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, general purpose .../gp.html, compute
# optimized .../co.html, memory optimized .../mo.html (the same figures AWS's own table in
# aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/training/constants.py INSTANCE_RESOURCES lists for
# ml.* types). Sizes not listed are not checked.
_GPU_SIZES = {"xlarge": (4, 16), "2xlarge": (8, 32), "4xlarge": (16, 64), "8xlarge": (32, 128),
              "12xlarge": (48, 192), "16xlarge": (64, 256), "24xlarge": (96, 384), "48xlarge": (192, 768)}
_TWO_PER_VCPU = {"large": (2, 4), "xlarge": (4, 8), "2xlarge": (8, 16), "4xlarge": (16, 32), "8xlarge": (32, 64),
                 "12xlarge": (48, 96), "16xlarge": (64, 128), "24xlarge": (96, 192)}
_FOUR_PER_VCPU = {size: (cpus, cpus * 4) for size, (cpus, _) in _TWO_PER_VCPU.items()}
_EIGHT_PER_VCPU = {size: (cpus, cpus * 8) for size, (cpus, _) in _TWO_PER_VCPU.items()}
VCPUS_MEMORY_GIB: dict[str, dict[str, tuple[int, int]]] = {
    "g4dn": {s: v for s, v in _GPU_SIZES.items() if s not in ("24xlarge", "48xlarge")},
    "g5": _GPU_SIZES,
    "g6": _GPU_SIZES,
    "g6e": {size: (cpus, memory * 2) for size, (cpus, memory) in _GPU_SIZES.items()},
    "p3": {"2xlarge": (8, 61), "8xlarge": (32, 244), "16xlarge": (64, 488)},
    "p4d": {"24xlarge": (96, 1152)},
    "p5": {"48xlarge": (192, 2048)},
    "c5": _TWO_PER_VCPU, "c5d": _TWO_PER_VCPU, "c6i": _TWO_PER_VCPU,
    "m5": _FOUR_PER_VCPU, "m5d": _FOUR_PER_VCPU, "m6i": _FOUR_PER_VCPU,
    "r5": _EIGHT_PER_VCPU,
    "t2": {"medium": (2, 4), "large": (2, 8), "xlarge": (4, 16), "2xlarge": (8, 32)},
    "t3": {"medium": (2, 4), "large": (2, 8), "xlarge": (4, 16), "2xlarge": (8, 32)},
}


def vcpus_memory_gib(name: str) -> tuple[int, int] | None:
    """(vCPUs, memory in GiB) of an instance type, or None where the table has no figure."""
    found = lookup(name)
    return VCPUS_MEMORY_GIB.get(found.family_name, {}).get(found.size) if found else None


def vcpus(name: str) -> int:
    """vCPUs of an instance type: the table's figure, else what its size says (``large`` 2, ``Nxlarge`` 4 x N)."""
    figures = vcpus_memory_gib(name)
    if figures is not None:
        return figures[0]
    size = name.rsplit(".", 1)[-1]
    match = re.fullmatch(r"(\d*)xlarge", size)
    return 4 * int(match.group(1) or 1) if match else {"medium": 1, "large": 2}.get(size, 1)
