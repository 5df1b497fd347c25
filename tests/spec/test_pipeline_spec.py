"""The pipeline: section: every bad value rejected with one message naming the field, the value, what is
allowed and the fix; a good section parsed into its defaults."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.pipeline import BuildComputeKind
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
ARN = "arn:aws:codeconnections:us-east-1:123456789012:connection/12345678-1234-1234-1234-123456789012"
GOOD = {"connection_arn": ARN, "repository": "acme/triton-models", "account": "123456789012",
        "stages": ["dev", "staging", "prod"], "manual_approval": ["prod"]}


def _parse(**changes):
    raw = copy.deepcopy(BASE)
    raw["pipeline"] = {**GOOD, **changes}
    for key in [k for k, v in changes.items() if v is None]:
        del raw["pipeline"][key]
    return parse_spec(raw, pathlib.Path("triton.yaml"))


def test_a_good_section_with_its_defaults():
    pipeline = _parse().pipeline
    assert (pipeline.branch, pipeline.build_compute.kind, pipeline.load_test_phase_seconds,
            pipeline.load_test_concurrency) == ("main", BuildComputeKind.GPU_SMALL, 30, (1, 2, 4, 8, 16))
    assert pipeline.tested_stages() == ("staging",)  # the stage right before the approval
    assert pipeline.build_compute.describe() == "gpu-small (NVIDIA A10G, compute capability 8.6)"
    assert _parse(build_compute={"kind": "gpu-large"}).pipeline.build_compute.describe() == \
        "gpu-large (NVIDIA V100, compute capability 7.0)"
    assert parse_spec(BASE, pathlib.Path("triton.yaml")).pipeline is None


CASES = [
    (dict(connection_arn="arn:aws:codestar:us-east-1:1:connection/x"),
     "pipeline.connection_arn: got 'arn:aws:codestar:us-east-1:1:connection/x'; allowed: a connection ARN, "
     "arn:aws:codeconnections:<region>:<12-digit account>:connection/<uuid> (or codestar-connections); fix: copy the "
     "ARN of an AVAILABLE connection: `aws codeconnections list-connections`, or the console's Developer Tools > "
     "Settings > Connections"),
    (dict(repository="triton-models"),
     "pipeline.repository: got 'triton-models'; allowed: owner/name, e.g. acme/triton-models; fix: write the "
     "repository as on GitHub / GitLab / Bitbucket: owner/name"),
    (dict(stages=["dev", "qa"], manual_approval=[]),
     "pipeline.stages[1]: got 'qa'; allowed: an environment of this spec (dev, prod, staging); fix: add it under "
     "environments: or fix the name"),
    (dict(manual_approval=["production"]),
     "pipeline.manual_approval[0]: got 'production'; allowed: a name in pipeline.stages (dev, staging, prod); fix: "
     "add it to pipeline.stages or remove it here"),
    (dict(stages=["dev", "dev"], manual_approval=[]),
     "pipeline.stages: got dev more than once; allowed: each environment once; fix: remove the repeated name"),
    (dict(stages=[], manual_approval=[]),
     "pipeline.stages: got an empty list; allowed: one or more environment names, in deploy order; fix: list the "
     "environments, e.g. [dev, staging, prod]"),
    (dict(account=None),
     "pipeline.account: got nothing, with stages in us-west-2 and the pipeline in us-east-1; allowed: a 12-digit "
     "account ID: CodePipeline's cross-region support needs the pipeline's account; fix: add account: "
     "\"123456789012\" (yours, in quotes) under pipeline:"),
    (dict(build_compute={"kind": "fleet"}),
     "pipeline.build_compute.instance_type: got nothing (the key is missing); allowed: an EC2 GPU instance type for "
     "the reserved-capacity fleet, e.g. g6.xlarge; fix: add instance_type: under build_compute"),
    (dict(build_compute={"kind": "fleet", "instance_type": "m5.xlarge"}),
     "pipeline.build_compute.instance_type: got 'm5.xlarge'; allowed: a GPU instance type of a known family: p2 "
     "(K80), p3 (V100), g4dn (T4), g5 (A10G), g6 (L4), g6e (L40S), g7 (RTX PRO 4500 Blackwell), g7e (RTX PRO 6000 "
     "Blackwell), p4d (A100), p4de (A100 80GB), p5 (H100), p5e (H200), p5en (H200), p6-b200 (B200), p6-b300 (B300), "
     "p6e-gb200 (GB200); fix: pick the family of the endpoints' instance type, e.g. g5.xlarge for ml.g5"),
    (dict(build_compute={"kind": "gpu-small", "instance_type": "g5.xlarge"}),
     "pipeline.build_compute.instance_type: got 'g5.xlarge'; allowed: no instance_type with kind gpu-small (its GPU "
     "is fixed); fix: remove instance_type, or set kind: fleet for a reserved-capacity fleet of that type"),
    (dict(build_compute={"kind": "gpu-medium"}),
     "pipeline.build_compute.kind: got 'gpu-medium'; allowed: gpu-small, gpu-large, fleet; fix: use one of "
     "gpu-small, gpu-large, fleet"),
    (dict(load_test_concurrency=[4, 2]),
     "pipeline.load_test_concurrency: got [4, 2]; allowed: rising positive integers; fix: write e.g. [1, 2, 4, 8, 16]"),
    (dict(load_test_phase_seconds=3600),
     "pipeline.load_test_phase_seconds: got 3600; allowed: an integer from 5 to 300; fix: set it within 5..300"),
    (dict(brnch="main"),
     "pipeline.brnch: got unknown key 'brnch'; allowed: connection_arn, repository, stages, branch, manual_approval, "
     "smoke_test_stages, account, region, build_compute, load_test_phase_seconds, load_test_concurrency; fix: did "
     "you mean 'branch'?"),
]


@pytest.mark.parametrize("changes, message", CASES, ids=[c[1].split(":")[0] for c in CASES])
def test_each_bad_value_is_named_with_what_is_allowed_and_the_fix(changes, message):
    with pytest.raises(SpecError) as caught:
        _parse(**changes)
    assert [str(p) for p in caught.value.problems] == [message]
