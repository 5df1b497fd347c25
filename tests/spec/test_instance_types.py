"""Which instance types exist is botocore's answer; every real one is served or refused by a stated rule.

The list is generated (scripts/gen_instance_types.py) so the base install needs no botocore; here it is held
against the pinned service model, and every type in it is run through the rules.
"""
import gzip
import json
import pathlib

import pytest

from deployment_spec.facts import instances, sagemaker_instance_types
from deployment_spec.rules import sagemaker as rules
from deployment_spec.parsing.errors import PropsError

botocore = pytest.importorskip("botocore")
MODEL = pathlib.Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
# The reasons a real type may be refused: the rules of this product, never "unknown".
RULE_REASONS = ("an x86_64 instance type", "an NVIDIA GPU or CPU instance type")


def test_the_vendored_list_is_the_pinned_botocore_enum():
    with gzip.open(MODEL, "rt") as handle:
        enum = json.load(handle)["shapes"]["ProductionVariantInstanceType"]["enum"]
    # A botocore bump with new types fails here until scripts/gen_instance_types.py is rerun.
    assert (sagemaker_instance_types.BOTOCORE_VERSION, list(sagemaker_instance_types.INSTANCE_TYPES)) == (
        botocore.__version__, enum)


@pytest.mark.parametrize("name", sagemaker_instance_types.INSTANCE_TYPES)
def test_every_real_type_is_served_or_refused_by_a_rule(name):
    problems = rules.instance_type_known(name)
    if problems:
        [problem] = problems
        assert problem.allowed.startswith(RULE_REASONS), str(problem)
        return
    found = instances.lookup(name)
    # Served: its facts are known, and a GPU family's GPUs and compute capability come from the table.
    assert found is not None and found.vcpus >= 1
    family = name.split(".")[1]
    if family.startswith(("g", "p")):
        assert found.gpu_count >= 1 and found.family.compute_capability, name
    else:
        assert found.gpu_count == 0 and found.vcpus_memory_gib is not None, name


def test_the_coverage_floor():
    served = [n for n in sagemaker_instance_types.INSTANCE_TYPES if not rules.instance_type_known(n)]
    gpu = [n for n in served if instances.lookup(n).is_gpu]
    # 277 types at botocore 1.44.5: 169 served (56 of them NVIDIA GPU), 95 arm64, 13 other accelerators.
    assert (len(sagemaker_instance_types.INSTANCE_TYPES), len(served), len(gpu)) == (277, 169, 56)


def test_arm64_and_other_accelerators_are_refused_with_the_reason():
    assert [str(p) for p in rules.instance_type_known("ml.c7g.xlarge")] == [
        "instance_type: got 'ml.c7g.xlarge'; allowed: an x86_64 instance type: sagemaker-tritonserver images are "
        "x86_64 only (the SageMaker SDK serves arm64 images for tensorflow, pytorch, xgboost and sklearn only: "
        "sagemaker-core fw_utils.GRAVITON_ALLOWED_FRAMEWORKS); fix: use an x86_64 type, e.g. ml.c7i.xlarge for CPU "
        "or ml.g5.xlarge for GPU"]
    assert [str(p) for p in rules.instance_type_known("ml.inf2.xlarge")] == [
        "instance_type: got 'ml.inf2.xlarge'; allowed: an NVIDIA GPU or CPU instance type: ml.inf2 carries AWS "
        "Inferentia2, which the sagemaker-tritonserver image (CUDA, no Neuron or Gaudi runtime) cannot use; fix: use "
        "an NVIDIA GPU type such as ml.g5.xlarge, or a CPU type such as ml.c7i.xlarge"]


def test_a_real_type_the_table_lacks_is_refused_naming_what_to_declare(monkeypatch):
    # A botocore release that adds a GPU family this table does not know yet.
    monkeypatch.setattr(instances, "INSTANCE_TYPES", (*instances.INSTANCE_TYPES, "ml.g9.xlarge"))
    assert [str(p) for p in rules.instance_type_known("ml.g9.xlarge")] == [
        "instance_type: got 'ml.g9.xlarge'; allowed: a type whose GPU this library's table knows (p2, p3, g4dn, g5, "
        "g6, g6e, g7, g7e, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300, p6e-gb200); fix: declare its facts "
        "(instance_facts: gpus, compute_capability, vcpus, memory_gib) from the EC2 instance type specifications"]
    facts = instances.InstanceFacts(gpus=1, compute_capability="12.0", gpu="RTX 9000", vcpus=4, memory_gib=32)
    assert rules.instance_type_known("ml.g9.xlarge", facts) == []
    found = instances.lookup("ml.g9.xlarge", facts)
    assert (found.gpu_count, found.family.compute_capability, found.vcpus_memory_gib, found.declared) == (
        1, "12.0", (4, 32), True)


def test_declared_facts_serve_a_type_newer_than_the_pin_and_are_refused_for_a_known_one():
    facts = instances.InstanceFacts(gpus=1, compute_capability="12.0", vcpus=8, memory_gib=64)
    # ml.g9.2xlarge is in no botocore release yet: declared, it is served with its facts.
    assert rules.endpoint_problems(instance_type="ml.g9.2xlarge", multi_model=False, triton_version="26.05",
                                   initial_instances=1, scaling=None, volume_size_gb=None, instance_facts=facts) == []
    assert [str(p) for p in rules.instance_type_known("ml.g5.xlarge", facts)] == [
        "instance_facts: got 'ml.g5.xlarge'; allowed: no instance_facts for ml.g5.xlarge: this library knows its "
        "facts; fix: remove instance_facts (they would override the table)"]


def test_instance_facts_check_their_own_fields():
    with pytest.raises(PropsError) as caught:
        instances.InstanceFacts(gpus=2)
    assert str(caught.value) == (
        "InstanceFacts: 1 problem\n  - compute_capability: got nothing; allowed: the compute capability of the 2 "
        "GPU(s), e.g. '8.9'; fix: add it (https://developer.nvidia.com/cuda-gpus)")
