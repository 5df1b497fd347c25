"""Where the GPUs come from: an ML capacity reservation behind a variant (the template's CapacityReservationConfig,
and what synth refuses: a reservation of another type, fallback pools it would never use, more instances than it
holds, another region), and instance pools on inference-component endpoints."""
import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cfnlint.api import ManualArgs, lint_file

from api_model_check import check_template
from user_app import model_archive, user_stack
from triton_constructs import (CapacityReservation, ComponentSpec, ManagedInstances, ModelArchive, ModelRepositories,
                               PropsError, Reservation, Scaling, TritonComponentsEndpoint, TritonSageMakerEndpoint)

ARN = "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/inference-plan-1"
P5 = CapacityReservation(arn=ARN, instance_type="ml.p5.48xlarge", instances=2)


def _models(tmp_path):
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])


def test_the_reservation_reaches_the_variant_and_every_checker_accepts_it(tmp_path):
    stack = user_stack()
    TritonSageMakerEndpoint(stack, "Endpoint", models=_models(tmp_path), instance_type="ml.p5.48xlarge",
                            endpoint_name="e", scaling=Scaling(min_instances=1, max_instances=2),
                            capacity_reservation=P5)
    template = Template.from_stack(stack)
    [config] = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    assert variant["CapacityReservationConfig"] == {"CapacityReservationPreference": "capacity-reservations-only",
                                                    "MlReservationArn": ARN}
    assert variant["InstanceType"] == "ml.p5.48xlarge"
    body = template.to_json()
    assert check_template(body).findings == []  # SageMaker's service model (botocore) takes every value
    written = tmp_path / "endpoint.template.json"
    written.write_text(json.dumps(body))
    assert [str(m) for m in lint_file(written, config=ManualArgs(regions=["us-east-1"]))] == []


def test_a_reservation_the_endpoint_does_not_fit_is_refused_with_every_reason(tmp_path):
    stack = cdk.Stack(cdk.App(), "Governed", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(stack, "Endpoint", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                                endpoint_name="e", scaling=Scaling(min_instances=1, max_instances=4),
                                fallback_instance_types=("ml.g6.xlarge",), capacity_reservation=P5)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint Governed/Endpoint: 4 problems\n"
        "  - capacity_reservation.instance_type: got 'ml.p5.48xlarge'; allowed: the endpoint's instance_type "
        "ml.g5.xlarge: instances launch only into the reservation (capacity-reservations-only); fix: run the "
        "endpoint on the reserved type, or name the reservation that holds its type\n"
        "  - fallback_instance_types: got 1 pool(s) with capacity_reservation; allowed: one of them: with "
        "capacity-reservations-only SageMaker launches only into the reservation, so a fallback pool would never be "
        "used; fix: remove fallback_instance_types, or the reservation\n"
        "  - scaling.max_instances: got 4; allowed: at most the 2 instance(s) the reservation holds: more fail to "
        "launch; fix: lower max_instances, or reserve more instances\n"
        f"  - capacity_reservation.arn: got '{ARN}'; allowed: a reservation in the stack's region eu-west-1; "
        "fix: name the reservation made in that region")


def test_a_malformed_reservation_arn_is_refused():
    with pytest.raises(PropsError) as caught:
        CapacityReservation(arn="arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-1",
                            instance_type="ml.p5.48xlarge", instances=2)
    assert str(caught.value) == (
        "CapacityReservation: 1 problem\n  - arn: got 'arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-1'; "
        "allowed: arn:aws:sagemaker:<region>:<12-digit account>:ml-reservation/<id>; fix: copy the ARN of the ML "
        "reservation (not an EC2 capacity reservation) from the training plan")


def test_inference_components_take_the_reservation_within_their_managed_ceiling(tmp_path):
    stack = user_stack()
    TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path), instance_type="ml.p5.48xlarge",
                             endpoint_name="shared", managed_instances=ManagedInstances(1, 2),
                             capacity_reservation=P5)
    [config] = Template.from_stack(stack).find_resources("AWS::SageMaker::EndpointConfig").values()
    assert config["Properties"]["ProductionVariants"][0]["CapacityReservationConfig"]["MlReservationArn"] == ARN
    with pytest.raises(PropsError) as caught:
        TritonComponentsEndpoint(user_stack(), "Shared", models=_models(tmp_path), instance_type="ml.p5.48xlarge",
                                 endpoint_name="shared", managed_instances=ManagedInstances(1, 3),
                                 capacity_reservation=P5)
    assert str(caught.value).endswith(
        "  - managed_instances.max_instances: got 3; allowed: at most the 2 instance(s) the reservation holds: more fail to "
        "launch; fix: lower max_instances, or reserve more instances")


def test_inference_components_take_instance_pools_their_copies_fit(tmp_path):
    stack = user_stack()
    copy = {"resnet50": ComponentSpec(reservation=Reservation(memory_mb=12_000))}
    TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path), instance_type="ml.g5.2xlarge",
                             endpoint_name="shared", components=copy, fallback_instance_types=("ml.g6.xlarge",))
    template = Template.from_stack(stack)
    [config] = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    assert variant["InstancePools"] == [{"InstanceType": "ml.g5.2xlarge", "Priority": 1},
                                        {"InstanceType": "ml.g6.xlarge", "Priority": 2}]
    assert "InstanceType" not in variant
    assert check_template(template.to_json()).findings == []


def test_a_pool_whose_instances_cannot_hold_a_copy_is_refused_naming_the_pool(tmp_path):
    # 20 000 MB per copy fits the 32 GiB of ml.g5.2xlarge, not the 16 GiB of the ml.g6.xlarge pool.
    copy = {"resnet50": ComponentSpec(reservation=Reservation(memory_mb=20_000))}
    with pytest.raises(PropsError) as caught:
        TritonComponentsEndpoint(user_stack(), "Shared", models=_models(tmp_path), instance_type="ml.g5.2xlarge",
                                 endpoint_name="shared", components=copy, fallback_instance_types=("ml.g6.xlarge",))
    assert str(caught.value) == (
        "TritonComponentsEndpoint UserApp/Shared: 1 problem\n"
        "  - fallback_instance_types[0].components.resnet50.reservation.memory_mb: got 20000; allowed: at most the "
        "16384 MB (16 GiB) of one ml.g6.xlarge; fix: reserve less memory per copy or choose a larger instance type")


def test_a_pool_build_for_no_pool_or_of_other_models_is_refused(tmp_path):
    (tmp_path / "b").mkdir()
    other = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path / "b", "bert"))])
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                                endpoint_name="e", fallback_instance_types=("ml.g6.xlarge",),
                                pool_models={"ml.g6.xlarge": other, "ml.g4dn.xlarge": other})
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 2 problems\n"
        "  - pool_models.ml.g4dn.xlarge: got 'ml.g4dn.xlarge'; allowed: one of fallback_instance_types "
        "(ml.g6.xlarge); fix: key each build by the instance type of its pool\n"
        "  - pool_models.ml.g6.xlarge: got models bert; allowed: the endpoint's models (resnet50): callers name them "
        "whichever pool serves; fix: build the same spec models on that pool's GPU")
