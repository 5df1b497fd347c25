"""Facts about SageMaker instance types that decide what a spec may ask for.

Which types exist is the service's answer: ``sagemaker_instance_types.INSTANCE_TYPES``, generated from
botocore's ``ProductionVariantInstanceType`` enum at the pinned version. What the rules need to know of a type
comes from here:

- NVIDIA GPU families: a table (``FAMILIES``): the GPU, its compute capability
  (https://developer.nvidia.com/cuda-gpus), GPUs per size, local NVMe storage (no ``KmsKeyId`` volume, no
  ``VolumeSizeInGB``), whether SageMaker lists the family for GPU multi-model endpoints
  (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-support.html: p2, p3, g4dn, g5), vCPUs and
  memory per size (the EC2 instance type specifications, as AWS's aws/sagemaker-hyperpod-cli
  ``src/sagemaker/hyperpod/training/constants.py`` ``INSTANCE_RESOURCES`` lists them for ml.* types).
- CPU families (c, m, r): read off the name by EC2's naming convention
  (https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html): ``d`` local NVMe, ``g``
  Graviton (arm64); vCPUs from the size (``large`` 2, ``xlarge`` 4, ``Nxlarge`` 4 x N) and memory per vCPU by
  class (c 2 GiB, m 4, r 8, the EC2 specification pages); the families that break that pattern (t2, c4) are in
  the table. Multi-model endpoints support every CPU type (the multi-model page above).
- Other accelerators (Inferentia, Trainium, Gaudi) and arm64 hosts: real types the sagemaker-tritonserver image
  cannot use; ``servable_problem`` says why.

A real type the table lacks (a GPU family newer than this table), or one newer than the pinned botocore, is
served when its facts are declared (``InstanceFacts``), else refused naming what to declare.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import Validated, join, meta
from deployment_spec.facts.sagemaker_instance_types import BOTOCORE_VERSION, INSTANCE_TYPES

_TYPE = re.compile(r"ml\.(?P<family>[a-z0-9-]+)\.(?P<size>medium|large|[0-9]*xlarge)")
_CPU_FAMILY = re.compile(r"(?P<kind>[cmrt])(?P<generation>[0-9]+)(?P<options>[a-z-]*)")
_MEMORY_PER_VCPU = {"c": 2, "m": 4, "r": 8}


@dataclasses.dataclass(frozen=True)
class Family:
    gpu: str | None                    # GPU model, None for CPU families
    compute_capability: str | None     # e.g. "8.6"
    gpus: Mapping[str, int]            # GPUs per size; sizes not listed have 1 (GPU) / 0 (CPU)
    nvme: bool                         # local NVMe instance storage
    mme: bool                          # SageMaker lists it for multi-model endpoints
    burstable: bool = False
    arm64: bool = False                # Graviton / Grace host CPU
    vcpus_memory: Mapping[str, tuple[int, float | None]] = dataclasses.field(default_factory=dict)  # per size: vCPUs, GiB


def _sizes(**figures: tuple[int, float]) -> dict[str, tuple[int, float | None]]:
    """Per-size (vCPUs, memory GiB); keyword ``x2`` stands for size ``2xlarge`` (``x1`` for ``xlarge``)."""
    return {("xlarge" if key == "x1" else key.removeprefix("x") + "xlarge") if key.startswith("x") else key: value
            for key, value in figures.items()}


_G5 = _sizes(x1=(4, 16), x2=(8, 32), x4=(16, 64), x8=(32, 128), x12=(48, 192), x16=(64, 256), x24=(96, 384),
             x48=(192, 768))
_G5_GPUS = {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
FAMILIES: dict[str, Family] = {
    # NVIDIA GPU families of ProductionVariantInstanceType.
    "p2": Family("K80", "3.7", {"8xlarge": 8, "16xlarge": 16}, nvme=False, mme=True,
                 vcpus_memory=_sizes(x1=(4, 61), x8=(32, 488), x16=(64, 732))),
    "p3": Family("V100", "7.0", {"8xlarge": 4, "16xlarge": 8}, nvme=False, mme=True,
                 vcpus_memory=_sizes(x2=(8, 61), x8=(32, 244), x16=(64, 488))),
    "g4dn": Family("T4", "7.5", {"12xlarge": 4}, nvme=True, mme=True,
                   vcpus_memory={s: v for s, v in _G5.items() if s not in ("24xlarge", "48xlarge")}),
    "g5": Family("A10G", "8.6", _G5_GPUS, nvme=True, mme=True, vcpus_memory=_G5),
    "g6": Family("L4", "8.9", _G5_GPUS, nvme=True, mme=False, vcpus_memory=_G5),
    "g6e": Family("L40S", "8.9", _G5_GPUS, nvme=True, mme=False,
                  vcpus_memory={size: (cpus, memory * 2 if memory is not None else None)
                                for size, (cpus, memory) in _G5.items()}),
    # G7 / G7e (2026): GPUs and sizes from the EC2 G7/G7e specifications (as kubernetes/autoscaler#9854 and
    # aws/sagemaker-hyperpod-cli#390 copy them); their local NVMe on SageMaker is not confirmed here.
    "g7": Family("RTX PRO 4500 Blackwell", "12.0", {"8xlarge": 2, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
                 nvme=True, mme=False,
                 vcpus_memory=_sizes(x2=(8, 32), x4=(16, 64), x8=(32, 128), x12=(48, 192), x24=(96, 384),
                                     x48=(192, 768))),
    "g7e": Family("RTX PRO 6000 Blackwell", "12.0", {"12xlarge": 2, "24xlarge": 4, "48xlarge": 8}, nvme=True,
                  mme=False, vcpus_memory=_sizes(x2=(8, 64), x4=(16, 128), x8=(32, 256), x12=(48, 512),
                                                 x24=(96, 1024), x48=(192, 2048))),
    "p4d": Family("A100", "8.0", {"24xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x24=(96, 1152))),
    "p4de": Family("A100 80GB", "8.0", {"24xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x24=(96, 1152))),
    "p5": Family("H100", "9.0", {"48xlarge": 8}, nvme=True, mme=False,
                 vcpus_memory=_sizes(x4=(16, 256), x48=(192, 2048))),
    "p5e": Family("H200", "9.0", {"48xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x48=(192, 2048))),
    "p5en": Family("H200", "9.0", {"48xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x48=(192, 2048))),
    "p6-b200": Family("B200", "10.0", {"48xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x48=(192, 2048))),
    "p6-b300": Family("B300", "10.3", {"48xlarge": 8}, nvme=True, mme=False, vcpus_memory=_sizes(x48=(192, 4096))),
    "p6e-gb200": Family("GB200", "10.0", {"36xlarge": 4}, nvme=True, mme=False, arm64=True,
                        vcpus_memory=_sizes(x36=(144, 960))),
    # CPU families whose memory does not follow their class's ratio.
    "t2": Family(None, None, {}, nvme=False, mme=True, burstable=True,
                 vcpus_memory={"medium": (2, 4), "large": (2, 8), "xlarge": (4, 16), "2xlarge": (8, 32)}),
    "c4": Family(None, None, {}, nvme=False, mme=True,
                 vcpus_memory={"large": (2, 3.75), "xlarge": (4, 7.5), "2xlarge": (8, 15), "4xlarge": (16, 30),
                               "8xlarge": (36, 60)}),
}
# Real types with accelerators the sagemaker-tritonserver image (CUDA) cannot use.
OTHER_ACCELERATORS = {"inf1": "AWS Inferentia", "inf2": "AWS Inferentia2", "trn1": "AWS Trainium",
                      "trn1n": "AWS Trainium", "trn2": "AWS Trainium2", "dl1": "Habana Gaudi"}


@dataclasses.dataclass(frozen=True)
class InstanceFacts(Validated):
    """What the rules need to know of an instance type this library's table lacks, declared by you.

    Give it for a real SageMaker type whose GPU the table does not know, or for a type AWS added after the
    pinned botocore's list. Take the figures from the EC2 instance type specifications.

    Attributes:
        gpus: NVIDIA GPUs per instance (0: a CPU type).
        compute_capability: Of those GPUs, e.g. ``"8.9"`` (https://developer.nvidia.com/cuda-gpus); required
            with GPUs.
        gpu: The GPU's name, for messages. Defaults to ``compute capability <cc>``.
        vcpus: vCPUs per instance. Defaults to what the size says (``xlarge`` 4, ``Nxlarge`` 4 x N).
        memory_gib: Memory per instance; needed by inference components. Defaults to unknown.
        nvme: The type has local NVMe instance storage. Defaults to False.
        multi_model: SageMaker lists the type for GPU multi-model endpoints. Defaults to False (CPU types
            always may).
    """

    gpus: int = dataclasses.field(metadata=meta(minimum=0, maximum=64))
    compute_capability: Optional[str] = dataclasses.field(
        default=None, metadata=meta(pattern=r"[0-9]+\.[0-9]+", pattern_help="a compute capability such as '8.9'"))
    gpu: Optional[str] = None
    vcpus: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1))
    memory_gib: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.5))
    nvme: bool = False
    multi_model: bool = False

    def problems(self, path: str) -> list[Problem]:
        if self.gpus > 0 and self.compute_capability is None:
            return [Problem(join(path, "compute_capability"), "nothing", f"the compute capability of the "
                            f"{self.gpus} GPU(s), e.g. '8.9'", "add it (https://developer.nvidia.com/cuda-gpus)")]
        if self.gpus == 0 and self.compute_capability is not None:
            return [Problem(join(path, "compute_capability"), repr(self.compute_capability),
                            "nothing on a type without GPUs (gpus: 0)", "remove it, or give the GPU count")]
        return []

    def family(self, size: str) -> Family:
        gpu = (self.gpu or f"compute capability {self.compute_capability}") if self.gpus else None
        figures = {size: (self.vcpus or _vcpus_of_size(size), self.memory_gib)} if self.memory_gib or self.vcpus else {}
        return Family(gpu, self.compute_capability, {size: self.gpus}, nvme=self.nvme,
                      mme=self.multi_model or not self.gpus, vcpus_memory=figures)


@dataclasses.dataclass(frozen=True)
class InstanceType:
    name: str
    family_name: str
    size: str
    family: Family
    declared: bool = False  # the facts come from InstanceFacts, not from this table

    @property
    def gpu_count(self) -> int:
        default = 1 if self.family.gpu else 0
        return self.family.gpus.get(self.size, default)

    @property
    def is_gpu(self) -> bool:
        return self.family.gpu is not None

    @property
    def vcpus_memory_gib(self) -> tuple[int, float | None] | None:
        return self.family.vcpus_memory.get(self.size)

    @property
    def vcpus(self) -> int:
        """The table's (or the declared) figure, else what the size says (``large`` 2, ``Nxlarge`` 4 x N)."""
        figures = self.vcpus_memory_gib
        return figures[0] if figures is not None else _vcpus_of_size(self.size)


def split(name: str) -> tuple[str, str] | None:
    """(family, size) of ``ml.<family>.<size>``; None when the name has another shape."""
    match = _TYPE.fullmatch(name)
    return (match.group("family"), match.group("size")) if match else None


def exists(name: str) -> bool:
    """Whether ``name`` is a SageMaker real-time instance type in the pinned botocore's service model."""
    return name in INSTANCE_TYPES


def lookup(name: str, declared: Optional[InstanceFacts] = None) -> InstanceType | None:
    """The facts for ``name`` (e.g. ``ml.g5.xlarge``): declared ones, the table's, or a CPU family's read off
    its name; None when nothing is known (``servable_problem`` says why)."""
    parts = split(name)
    if parts is None:
        return None
    family_name, size = parts
    if declared is not None:
        return InstanceType(name, family_name, size, declared.family(size), declared=True)
    family = FAMILIES.get(family_name) or _cpu_family(family_name)
    return InstanceType(name, family_name, size, family) if family is not None else None


def _cpu_family(family_name: str) -> Family | None:
    match = _CPU_FAMILY.fullmatch(family_name)
    if match is None or match.group("kind") not in _MEMORY_PER_VCPU:
        return None
    options = match.group("options")
    per_vcpu = _MEMORY_PER_VCPU[match.group("kind")]
    figures = {size: (_vcpus_of_size(size), float(_vcpus_of_size(size) * per_vcpu))
               for size in ("large", "xlarge", *(f"{n}xlarge" for n in range(2, 49)))}
    return Family(None, None, {}, nvme="d" in options, mme=True, arm64="g" in options, vcpus_memory=figures)


def _vcpus_of_size(size: str) -> int:
    match = re.fullmatch(r"(\d*)xlarge", size)
    return 4 * int(match.group(1) or 1) if match else {"medium": 1, "large": 2}.get(size, 1)


def servable_problem(name: str, declared: Optional[InstanceFacts] = None) -> tuple[str, str] | None:
    """Why ``name`` cannot run the sagemaker-tritonserver image: (what is allowed, the fix); None when it can.

    The one home of "which types does this product serve on"; ``sagemaker_rules.instance_type_known``
    words it as a Problem.
    """
    parts = split(name)
    if declared is not None:
        if parts is None:
            return ("ml.<family>.<size>", "name the type as SageMaker does, e.g. ml.g5.xlarge")
        if exists(name) and lookup(name) is not None:
            return (f"no instance_facts for {name}: this library knows its facts",
                    "remove instance_facts (they would override the table)")
        return None
    if not exists(name):
        near = _near(name)
        return (f"a SageMaker real-time instance type (botocore {BOTOCORE_VERSION}'s ProductionVariantInstanceType, "
                f"{len(INSTANCE_TYPES)} types{'; nearest: ' + ', '.join(near) if near else ''})",
                f"use one of them; for a type AWS added after botocore {BOTOCORE_VERSION}, declare its facts "
                "(instance_facts: gpus, compute_capability, vcpus, memory_gib)")
    family_name = parts[0] if parts else ""
    if family_name in OTHER_ACCELERATORS:
        return (f"an NVIDIA GPU or CPU instance type: ml.{family_name} carries {OTHER_ACCELERATORS[family_name]}, "
                "which the sagemaker-tritonserver image (CUDA, no Neuron or Gaudi runtime) cannot use",
                "use an NVIDIA GPU type such as ml.g5.xlarge, or a CPU type such as ml.c7i.xlarge")
    found = lookup(name)
    if found is None:
        return (f"a type whose GPU this library's table knows ({', '.join(f for f, v in FAMILIES.items() if v.gpu)})",
                "declare its facts (instance_facts: gpus, compute_capability, vcpus, memory_gib) from the EC2 "
                "instance type specifications")
    if found.family.arm64:
        return ("an x86_64 instance type: sagemaker-tritonserver images are x86_64 only (the SageMaker SDK serves "
                "arm64 images for tensorflow, pytorch, xgboost and sklearn only: sagemaker-core "
                "fw_utils.GRAVITON_ALLOWED_FRAMEWORKS)",
                "use an x86_64 type, e.g. ml.c7i.xlarge for CPU or ml.g5.xlarge for GPU")
    return None


def _near(name: str) -> list[str]:
    import difflib
    return difflib.get_close_matches(name, INSTANCE_TYPES, n=3, cutoff=0.75)


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


def vcpus_memory_gib(name: str) -> tuple[int, float | None] | None:
    """(vCPUs, memory in GiB) of an instance type, or None where nothing is known."""
    found = lookup(name)
    return found.vcpus_memory_gib if found else None


def vcpus(name: str) -> int:
    """vCPUs of an instance type: the table's figure, else what its size says (``large`` 2, ``Nxlarge`` 4 x N)."""
    found = lookup(name)
    return found.vcpus if found is not None else _vcpus_of_size(name.rsplit(".", 1)[-1])
