"""The optional ``pipeline:`` section: a CDK Pipelines delivery pipeline (GPU model build, staged deploys).

Which GPU a CodeBuild build runs on decides where a TensorRT plan can run (a plan runs only on
the compute capability it was built for), so the build compute's GPU is a fact of this section.
On-demand GPU builds (botocore's CodeBuild model, ``ProjectEnvironment.computeType``, and
https://docs.aws.amazon.com/codebuild/latest/APIReference/API_ProjectEnvironment.html):
``BUILD_GENERAL1_SMALL`` with ``LINUX_GPU_CONTAINER`` has 1 NVIDIA A10G, ``BUILD_GENERAL1_LARGE``
has 4 NVIDIA Tesla V100. Any other GPU needs a reserved-capacity fleet of a custom instance type
(https://docs.aws.amazon.com/codebuild/latest/userguide/fleets.html); CodeBuild does not accept
every instance type there, and a refused one fails the pipeline stack's deploy.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Mapping, Optional

from deployment_spec.facts import instances
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import meta

# arn:<partition>:codeconnections|codestar-connections:<region>:<account>:connection/<id>
# (https://docs.aws.amazon.com/dtconsole/latest/userguide/connections.html; CodeStar Connections
# was renamed CodeConnections in 2024 and both ARN service names are accepted).
CONNECTION_ARN = (r"arn:aws(-cn|-us-gov)?:(codeconnections|codestar-connections):[a-z]{2}(-[a-z]+)+-[0-9]:"
                  r"[0-9]{12}:connection/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
REPOSITORY = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,99})/[A-Za-z0-9_.-]{1,100}"
EC2_GPU_TYPE = r"[a-z0-9]+\.[0-9]*x?large"


class BuildComputeKind(str, enum.Enum):
    GPU_SMALL = "gpu-small"    # on demand, BUILD_GENERAL1_SMALL, LINUX_GPU_CONTAINER
    GPU_LARGE = "gpu-large"    # on demand, BUILD_GENERAL1_LARGE, LINUX_GPU_CONTAINER
    FLEET = "fleet"            # reserved capacity, CUSTOM_INSTANCE_TYPE


# The GPU family (deployment_spec.facts.instances) each on-demand GPU compute type runs on.
ON_DEMAND_GPU = {BuildComputeKind.GPU_SMALL: "g5", BuildComputeKind.GPU_LARGE: "p3"}


@dataclasses.dataclass(frozen=True)
class BuildGpu:
    name: str                 # e.g. "A10G"
    compute_capability: str   # e.g. "8.6"


@dataclasses.dataclass(frozen=True)
class BuildCompute:
    kind: BuildComputeKind = BuildComputeKind.GPU_SMALL
    # fleet only: the EC2 instance type of the reserved-capacity fleet, e.g. g6.xlarge
    instance_type: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=EC2_GPU_TYPE, pattern_help="an EC2 GPU instance type such as g6.xlarge (no ml. prefix)"))

    @property
    def gpu(self) -> Optional[BuildGpu]:
        family = ON_DEMAND_GPU.get(self.kind)
        if family is None:
            itype = instances.lookup(f"ml.{self.instance_type}") if self.instance_type else None
            family = itype.family_name if itype else None
        fam = instances.FAMILIES.get(family) if family else None
        return BuildGpu(fam.gpu, fam.compute_capability) if fam and fam.gpu and fam.compute_capability else None

    def describe(self) -> str:
        """``gpu-small (NVIDIA A10G, compute capability 8.6)``, for messages."""
        where = f"fleet of {self.instance_type}" if self.kind is BuildComputeKind.FLEET else self.kind.value
        gpu = self.gpu
        return f"{where} (NVIDIA {gpu.name}, compute capability {gpu.compute_capability})" if gpu else where

    def problems(self, path: str) -> list[Problem]:
        if self.kind is not BuildComputeKind.FLEET:
            if self.instance_type is not None:
                return [Problem(f"{path}.instance_type", describe(self.instance_type),
                                f"no instance_type with kind {self.kind.value} (its GPU is fixed)",
                                "remove instance_type, or set kind: fleet for a reserved-capacity fleet of that type")]
            return []
        if self.instance_type is None:
            return [Problem(f"{path}.instance_type", "nothing (the key is missing)",
                            "an EC2 GPU instance type for the reserved-capacity fleet, e.g. g6.xlarge",
                            "add instance_type: under build_compute")]
        if self.gpu is None:
            gpus = ", ".join(f"{n} ({f.gpu})" for n, f in instances.FAMILIES.items() if f.gpu)
            return [Problem(f"{path}.instance_type", describe(self.instance_type),
                            f"a GPU instance type of a known family: {gpus}",
                            "pick the family of the endpoints' instance type, e.g. g5.xlarge for ml.g5")]
        return []


@dataclasses.dataclass(frozen=True)
class PipelineSpec:
    connection_arn: str = dataclasses.field(metadata=meta(
        help="the ARN of a CodeConnections connection to the repository's host"))
    repository: str = dataclasses.field(metadata=meta(help="the source repository as owner/name"))
    stages: tuple[str, ...] = dataclasses.field(metadata=meta(
        help="the environments to deploy, in order, e.g. [dev, staging, prod]"))
    branch: str = dataclasses.field(default="main", metadata=meta(
        pattern=r"[^\s~^:?*\[\\]{1,255}", pattern_help="a git branch name"))
    manual_approval: tuple[str, ...] = ()
    # Stages whose endpoints get the smoke and load test after deploying; default: each stage
    # right before one that waits for an approval (the stage that shows a release works).
    smoke_test_stages: Optional[tuple[str, ...]] = None
    account: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=r"[0-9]{12}", pattern_help="a 12-digit AWS account ID in quotes"))
    region: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]", pattern_help="an AWS region such as us-east-1"))
    build_compute: BuildCompute = BuildCompute()
    # The load test after deploy: phases of rising concurrency, each this long, stopping at the latency SLA.
    load_test_phase_seconds: int = dataclasses.field(default=30, metadata=meta(minimum=5, maximum=300))
    load_test_concurrency: tuple[int, ...] = dataclasses.field(default=(1, 2, 4, 8, 16), metadata=meta(
        minimum=1, maximum=256))

    def problems(self, path: str) -> list[Problem]:
        out = self.build_compute.problems(f"{path}.build_compute")
        if not re.fullmatch(CONNECTION_ARN, self.connection_arn):
            out.append(Problem(f"{path}.connection_arn", describe(self.connection_arn),
                               "a connection ARN, arn:aws:codeconnections:<region>:<12-digit account>:connection/<uuid> "
                               "(or codestar-connections)",
                               "copy the ARN of an AVAILABLE connection: `aws codeconnections list-connections`, or the "
                               "console's Developer Tools > Settings > Connections"))
        if not re.fullmatch(REPOSITORY, self.repository):
            out.append(Problem(f"{path}.repository", describe(self.repository), "owner/name, e.g. acme/triton-models",
                               "write the repository as on GitHub / GitLab / Bitbucket: owner/name"))
        for key in ("stages", "manual_approval", "smoke_test_stages"):
            names = getattr(self, key) or ()
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                out.append(Problem(f"{path}.{key}", f"{', '.join(dup)} more than once", "each environment once",
                                   "remove the repeated name"))
        if not self.stages:
            out.append(Problem(f"{path}.stages", "an empty list", "one or more environment names, in deploy order",
                               "list the environments, e.g. [dev, staging, prod]"))
        conc = self.load_test_concurrency
        if not conc or list(conc) != sorted(set(conc)):
            out.append(Problem(f"{path}.load_test_concurrency", f"[{', '.join(map(str, conc))}]",
                               "rising positive integers", "write e.g. [1, 2, 4, 8, 16]"))
        return out

    def where(self, environments: Mapping[str, EnvironmentSpec]) -> tuple[Optional[str], Optional[str]]:
        """The pipeline's account and region: its own, else the first stage's (CDK Pipelines needs a region)."""
        first = environments[self.stages[0]]
        return self.account or first.account, self.region or first.region

    def tested_stages(self) -> tuple[str, ...]:
        """Where the post-deploy smoke and load tests run."""
        if self.smoke_test_stages is not None:
            return self.smoke_test_stages
        return tuple(self.stages[i - 1] for i, name in enumerate(self.stages) if i and name in self.manual_approval)


def stage_rules(path: str, pipeline: PipelineSpec, environments: set[str],
                parsed: Mapping[str, EnvironmentSpec]) -> list[Problem]:
    """Every name in stages, manual_approval and smoke_test_stages must be an environment / a stage;
    CDK Pipelines needs the pipeline's region, and its account when a stage is in another region."""
    out = []
    for i, name in enumerate(pipeline.stages):
        if name not in environments:
            out.append(Problem(f"{path}.stages[{i}]", describe(name),
                               f"an environment of this spec ({', '.join(sorted(environments)) or 'none'})",
                               "add it under environments: or fix the name"))
    for key in ("manual_approval", "smoke_test_stages"):
        for i, name in enumerate(getattr(pipeline, key) or ()):
            if name not in pipeline.stages:
                out.append(Problem(f"{path}.{key}[{i}]", describe(name),
                                   f"a name in pipeline.stages ({', '.join(pipeline.stages)})",
                                   "add it to pipeline.stages or remove it here"))
    if out or not pipeline.stages or any(name not in parsed for name in pipeline.stages):
        return out
    account, region = pipeline.where(parsed)
    if region is None:
        out.append(Problem(f"{path}.region", "nothing (neither pipeline.region nor the first stage's region)",
                           "the region the pipeline runs in", "add region: under pipeline:, e.g. us-east-1"))
        return out
    elsewhere = sorted({parsed[n].region or region for n in pipeline.stages} - {region})
    if elsewhere and account is None:
        out.append(Problem(f"{path}.account", f"nothing, with stages in {', '.join(elsewhere)} and the pipeline in "
                           f"{region}", "a 12-digit account ID: CodePipeline's cross-region support needs the "
                           "pipeline's account", f"add account: \"123456789012\" (yours, in quotes) under pipeline:"))
    return out
