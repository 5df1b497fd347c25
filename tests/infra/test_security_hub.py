"""Security Hub's SageMaker controls at synth (triton_constructs.security_hub): each AWS Config rule's logic on
compliant and non-compliant properties, the plugin over every stage and example (findings only where the
library acknowledges a choice), and a planted twin the plugin reports by control ID."""
import json
import pathlib

import pytest
from aws_cdk import aws_ecr as ecr, aws_sagemaker as sagemaker
from aws_cdk.assertions import Template

from deployment_spec import load_spec
from deployment_spec.parsing.errors import SpecError
from synth_helpers import ROOT, synth_spec
from triton_constructs import ModelArchive, ModelRepositories, PropsError, TritonSageMakerEndpoint
from triton_constructs import security_hub as hub
from user_app import model_archive, user_stack

ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize("control, compliant, non_compliant", [
    (hub.INSTANCE_COUNT, {"ProductionVariants": [{"InitialInstanceCount": 2}, {"InitialInstanceCount": 3}]},
     {"ProductionVariants": [{"InitialInstanceCount": 2}, {"InitialInstanceCount": 1}]}),
    # A serverless variant has no instance count: not "equal to 1".
    (hub.INSTANCE_COUNT, {"ProductionVariants": [{"ServerlessConfig": {"MaxConcurrency": 5}}]},
     {"ProductionVariants": [{"InitialInstanceCount": 1}]}),
    (hub.NETWORK_ISOLATION, {"EnableNetworkIsolation": True}, {}),
    (hub.NETWORK_ISOLATION, {"EnableNetworkIsolation": True}, {"EnableNetworkIsolation": False}),
    (hub.PRIVATE_REGISTRY, {"PrimaryContainer": {"Image": "registry.internal/triton:25.09",
                                                 "ImageConfig": {"RepositoryAccessMode": "Vpc"}}},
     {"PrimaryContainer": {"Image": "x", "ImageConfig": {"RepositoryAccessMode": "Platform"}}}),
    # ImageConfig missing is NON_COMPLIANT too (the rule's words).
    (hub.PRIVATE_REGISTRY, {"Containers": [{"Image": "x"}]}, {"PrimaryContainer": {"Image": "x"}}),
    (hub.VOLUME_KEY, {"KmsKeyId": ARN}, {"ProductionVariants": []}),
])
def test_each_config_rule_judges_like_aws_config(control, compliant, non_compliant):
    # The same resource type with compliant properties passes, with the non-compliant ones fails.
    template = {"Resources": {"Good": {"Type": control.resource_type, "Properties": compliant},
                              "Bad": {"Type": control.resource_type, "Properties": non_compliant},
                              "Other": {"Type": "AWS::S3::Bucket", "Properties": {}}}}
    assert hub.evaluate(template, (control,)) == ([(control, "Bad")], 2)


def _judge(*synths) -> tuple[set[tuple[str, str]], int]:
    # synth() runs the plugin: it raises on a finding not acknowledged.
    return _judge_templates([p for s in synths for p in pathlib.Path(s.app.synth().directory).rglob("*.template.json")])


def _judge_templates(paths: list[pathlib.Path]) -> tuple[set[tuple[str, str]], int]:
    failed, judged = set(), 0
    for path in paths:
        template = json.loads(path.read_text())
        found, count = hub.evaluate(template)
        failed |= {(control.id, template["Resources"][lid]["Type"]) for control, lid in found}
        judged += count
    return failed, judged


def test_default_spec_breaks_only_the_acknowledged_controls(default_synth):
    failed, judged = _judge(default_synth)
    # SageMaker.16: AWS's own image, pulled with RepositoryAccessMode Platform. SageMaker.4: dev and staging
    # serve from one instance; prod keeps 2+ (production: true), so SageMaker.4 fails nowhere there.
    assert failed == {("SageMaker.16", hub.MODEL), ("SageMaker.4", hub.ENDPOINT_CONFIG)}
    # 2 endpoints x 3 stages: a model (SageMaker.5, .16) and a config (SageMaker.4, KMS key) each.
    assert judged == 6 * 4
    prod = [json.loads(p.read_text()) for p in pathlib.Path(default_synth.app.synth().directory).rglob(
        "assembly-TritonProd/*.template.json")]
    assert not [c.id for t in prod for c, _ in hub.evaluate(t)[0] if c is hub.INSTANCE_COUNT]


def test_every_stage_and_example_passes_the_plugin(every_assembly):
    # The shared synth ran the plugin too (app.synth() raises on a finding not acknowledged).
    failed, judged = _judge_templates([t for assembly in every_assembly.values() for t in assembly.templates()])
    # The test specs opt out of isolation with a reason (docs/operations/governed-accounts.md): acknowledged there, with it.
    assert failed <= {("SageMaker.16", hub.MODEL), ("SageMaker.4", hub.ENDPOINT_CONFIG), ("SageMaker.5", hub.MODEL)}
    assert judged >= 150, judged


def test_the_plugin_reports_a_planted_model_without_isolation(tmp_path):
    # The twin: prod's classifier model with network isolation turned off, after the library built it.
    synth = synth_spec(ROOT / "triton.yaml", tmp_path)
    endpoint = synth.stage("prod").endpoints["classifier"]
    model = next(c for c in endpoint.node.find_all() if isinstance(c, sagemaker.CfnModel))
    model.enable_network_isolation = False
    with pytest.raises(RuntimeError, match="^ValidationFailed: "):
        synth.app.synth()
    report = json.loads((tmp_path / "cdk.out" / "validation-report.json").read_text())
    [plugin] = [r for r in report["pluginReports"] if r["pluginName"] == hub.PLUGIN]
    assert [(v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]]) for v in plugin["violations"]] == [
        ("SageMaker.5", [model.node.path])]


def _models(tmp_path) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])


def test_the_image_comes_from_the_team_s_own_repository(tmp_path):
    # The same tag as AWS's image, from the team's ECR repository; the role pulls from that repository only.
    stack = user_stack()
    repository = ecr.Repository.from_repository_name(stack, "Triton", "ml/tritonserver")
    endpoint = TritonSageMakerEndpoint(stack, "Endpoint", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                                       triton_version="25.09", image_repository=repository)
    template = Template.from_stack(stack)
    [model] = template.find_resources(hub.MODEL).values()
    image = stack.resolve(model["Properties"]["PrimaryContainer"]["Image"])
    assert "ml/tritonserver:25.09-py3" in json.dumps(image) and "sagemaker-tritonserver" not in json.dumps(image)
    pulls = [s for p in template.find_resources("AWS::IAM::Policy").values()
             for s in p["Properties"]["PolicyDocument"]["Statement"] if "ecr:BatchGetImage" in s["Action"]]
    assert [stack.resolve(s["Resource"]) for s in pulls] == [stack.resolve(repository.repository_arn)]
    # Still an ECR pull (Platform): SageMaker.16 stays acknowledged, with the reason for a copy in ECR.
    reasons = [str(e.data) for e in endpoint.model.resource.node.metadata if "SageMaker.16" in str(e.data)]
    assert len(reasons) == 1 and "a copy in your own ECR repository" in reasons[0]


def test_an_image_repository_given_by_name_shows_how_to_import_it(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                                image_repository="ml/tritonserver")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - image_repository: got 'ml/tritonserver' (str); "
        "allowed: an ecr.IRepository or None; fix: import it: ecr.Repository.from_repository_name(self, 'Triton', "
        "'ml/tritonserver')")


def _spec_with_repository(tmp_path, name: str) -> pathlib.Path:
    text = (ROOT / "triton.yaml").read_text().replace(
        "    instance_type: ml.g5.xlarge\n    scaling: {min_instances: 1, max_instances: 3",
        f"    instance_type: ml.g5.xlarge\n    image_repository: {name}\n    scaling: {{min_instances: 1, max_instances: 3")
    path = tmp_path / "own-image.yaml"
    path.write_text(text)
    return path


def test_the_spec_names_the_repository_and_the_stacks_use_it(tmp_path):
    synth = synth_spec(_spec_with_repository(tmp_path, "ml/tritonserver"), tmp_path / "synth")
    [model] = synth.template("prod", "classifier").find_resources(hub.MODEL).values()
    assert "ml/tritonserver:25.09-py3" in json.dumps(model["Properties"]["PrimaryContainer"]["Image"])
    # The other endpoint keeps AWS's image.
    [other] = synth.template("prod", "vision-nlp").find_resources(hub.MODEL).values()
    assert "sagemaker-tritonserver:25.09-py3" in json.dumps(other["Properties"]["PrimaryContainer"]["Image"])


def test_a_malformed_repository_name_is_refused(tmp_path):
    path = _spec_with_repository(tmp_path, "ML/Triton!")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == (
        f"{path}: 1 problem\n  - endpoints.classifier.image_repository: got 'ML/Triton!'; allowed: an ECR repository "
        "name such as ml/tritonserver (lowercase letters, digits, . _ - and /); fix: rename it to match")
