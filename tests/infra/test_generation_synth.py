"""A streaming model's endpoint as synthesized: the container runs Triton's SageMaker front end in generate_stream
mode in every stage (the example passes cdk-nag, cfn-lint, checkov and the API-model check with the others:
fixtures/shared_assembly.py lists every example); the construct library refuses the mode where it cannot work."""
import json

import pytest

from deployment_spec.rules import streaming

EXAMPLE = "examples/t5-streaming-sme"
STREAMING = {EXAMPLE, "specs/vllm-engine"}  # the specs whose endpoints serve a streaming model


def _model_environments(assembly) -> list[dict]:
    found = []
    for template in assembly.templates():
        for resource in json.loads(template.read_text()).get("Resources", {}).values():
            if resource["Type"] == "AWS::SageMaker::Model":
                found.append(resource["Properties"]["PrimaryContainer"].get("Environment", {}))
    return found


def test_the_streaming_example_runs_the_container_in_generate_stream_mode_in_every_stage(every_assembly):
    environments = _model_environments(every_assembly[EXAMPLE])
    assert len(environments) == 3  # dev, staging, prod
    assert {env.get("SAGEMAKER_TRITON_INFERENCE_TYPE") for env in environments} == {"generate_stream"}
    assert every_assembly[EXAMPLE].nag_findings == []


def test_no_other_example_changes_the_containers_mode(every_assembly):
    # Guard twin of the test above: the mode comes from the streaming model, not from every endpoint.
    others = [env for name, assembly in every_assembly.items() if name not in STREAMING
              for env in _model_environments(assembly)]
    assert len(others) > 20
    assert not [env for env in others if "SAGEMAKER_TRITON_INFERENCE_TYPE" in env]


@pytest.mark.parametrize("multi_model,version,messages", [
    (True, "25.09", ["container.inference_type: got 'generate_stream'; allowed: infer on a multi-model endpoint (its "
                     "route, /models/<m>/invoke, takes infer requests only); fix: serve the generating model from a "
                     "single-model endpoint"]),
    (False, "24.09", ["container.inference_type: got 'generate_stream' with Triton 24.09; allowed: Triton 25.03 or "
                      "later (SAGEMAKER_TRITON_INFERENCE_TYPE came with it); fix: raise triton_version to 25.04 or "
                      "later, or remove inference_type"]),
    (False, "25.09", []),
])
def test_the_construct_librarys_rule_for_a_container_mode_given_by_hand(multi_model, version, messages):
    found = streaming.container_problems("generate_stream", multi_model=multi_model, triton_version=version)
    assert [str(p) for p in found] == messages


def _images(assembly) -> set:
    found = set()
    for template in assembly.templates():
        for resource in json.loads(template.read_text()).get("Resources", {}).values():
            if resource["Type"] == "AWS::SageMaker::Model":
                found.add(json.dumps(resource["Properties"]["PrimaryContainer"]["Image"]))
    return found


def test_a_vllm_model_is_served_from_nvidias_image_mirrored_under_its_own_tag(every_assembly):
    images = _images(every_assembly["specs/vllm-engine"])
    assert len(images) == 1 and ":25.09-vllm-python-py3" in images.pop()
    # Twin: a mirrored AWS image keeps AWS's tag (no engine, no NVIDIA tag).
    assert not [image for name, assembly in every_assembly.items() if name != "specs/vllm-engine"
                for image in _images(assembly) if "-python-py3" in image]
