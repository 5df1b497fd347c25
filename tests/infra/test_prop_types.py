"""A prop of the wrong type is refused when built, naming the prop, the value, what is allowed and the fix."""
import pytest

from user_app import model_archive, user_stack
from triton_constructs import (ComponentSpec, Container, ModelArchive, ModelRepositories, NetworkProps, PropsError, Scaling,
                               TritonComponentsEndpoint, TritonSageMakerEndpoint)


def _refusal(tmp_path, construct=TritonSageMakerEndpoint, **props) -> str:
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    props.setdefault("instance_type", "ml.g5.xlarge")
    with pytest.raises(PropsError) as caught:
        construct(user_stack(), "Endpoint", models=models, **props)
    return str(caught.value)


def test_a_number_given_as_text_names_the_field_and_its_bounds():
    with pytest.raises(PropsError) as caught:
        Scaling(max_instances="4")  # type: ignore[arg-type]
    assert str(caught.value) == ("Scaling: 1 problem\n  - max_instances: got '4' (str); allowed: an integer from 1 to "
                                 "100; fix: pass 4 without quotes")


def test_a_mapping_given_for_a_props_object_shows_the_object_to_build(tmp_path):
    assert _refusal(tmp_path, scaling={"max_instances": 4}) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - scaling: got {'max_instances': 4} (dict); allowed: "
        "a Scaling or None; fix: build it: Scaling(max_instances=4)")


def test_a_bucket_name_for_a_bucket_shows_how_to_import_it(tmp_path):
    assert _refusal(tmp_path, bucket="my-bucket") == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - bucket: got 'my-bucket' (str); allowed: an "
        "s3.IBucket or None; fix: import it: s3.Bucket.from_bucket_name(self, 'Models', 'my-bucket')")


def test_a_key_arn_for_a_key_shows_how_to_import_it(tmp_path):
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert _refusal(tmp_path, construct=TritonComponentsEndpoint, encryption_key=arn) == (
        f"TritonComponentsEndpoint UserApp/Endpoint: 1 problem\n  - encryption_key: got '{arn}' (str); allowed: a "
        f"kms.IKey or None; fix: import it: kms.Key.from_key_arn(self, 'Key', '{arn}')")


def test_enums_booleans_and_unknown_props(tmp_path):
    assert _refusal(tmp_path, multi_model="yes", removal_policy="RETAIN") == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 2 problems\n"
        "  - multi_model: got 'yes' (str); allowed: True or False; fix: pass True or False without quotes\n"
        "  - removal_policy: got 'RETAIN' (str); allowed: a cdk.RemovalPolicy (cdk.RemovalPolicy.DESTROY, "
        "cdk.RemovalPolicy.RETAIN, cdk.RemovalPolicy.SNAPSHOT, cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE); fix: "
        "pass cdk.RemovalPolicy.RETAIN")
    assert _refusal(tmp_path, scalling=Scaling()).endswith("fix: did you mean 'scaling'?")


def test_the_items_of_a_mapping_prop_are_checked_each_by_its_key(tmp_path):
    assert _refusal(tmp_path, construct=TritonComponentsEndpoint, instance_type="ml.g5.12xlarge",
                    components={"resnet50": {"copies": 2}}) == (
        "TritonComponentsEndpoint UserApp/Endpoint: 1 problem\n  - components.resnet50: got {'copies': 2} (dict); "
        "allowed: a ComponentSpec; fix: build it: ComponentSpec(copies=2)")


def test_network_props_check_their_own_fields():
    with pytest.raises(PropsError) as caught:
        NetworkProps(vpc="vpc-0123")  # type: ignore[arg-type]
    assert str(caught.value) == ("NetworkProps: 1 problem\n  - vpc: got 'vpc-0123' (str); allowed: an ec2.IVpc or "
                                 "None; fix: import it: ec2.Vpc.from_lookup(self, 'Vpc', vpc_id='vpc-0123')")


def test_a_list_given_for_a_tuple_field_is_kept_as_a_tuple():
    container = Container(additional_args=["--log-verbose=1"])
    assert container.additional_args == ("--log-verbose=1",)
    assert container == Container(additional_args=("--log-verbose=1",))
    with pytest.raises(PropsError) as caught:
        Container(additional_args=["--log-verbose=1", 2])  # type: ignore[list-item]
    assert str(caught.value) == ("Container: 1 problem\n  - additional_args[1]: got 2 (int); allowed: a string; fix: "
                                 "pass a string")


def test_a_path_given_for_archives_or_models_shows_the_call_that_builds_them(tmp_path):
    with pytest.raises(PropsError) as caught:
        ModelRepositories.from_archives("resnet.tar.gz")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "ModelRepositories.from_archives: 1 problem\n  - archives: got 'resnet.tar.gz' (str); allowed: a list of "
        "ModelArchives; fix: wrap it in a list: [ModelArchive.from_file('resnet.tar.gz')]")
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models="assets/manifest.json",  # type: ignore[arg-type]
                                instance_type="ml.g5.xlarge")
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - models: got 'assets/manifest.json' (str); allowed: "
        "a ModelRepositories; fix: build it: ModelRepositories.from_manifest('assets/manifest.json', [MODEL])")
