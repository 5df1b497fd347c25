"""Every SageMaker and Application Auto Scaling resource of every synthesized template against the request
shapes of the services' API models in botocore (fixtures/api_model_check.py): what SageMaker or Application
Auto Scaling would reject at deploy time fails here, with a planted twin and a floor on what was checked."""
import collections
import copy
import json
import pathlib

from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

import api_model_check
from api_model_check import CLOUDFORMATION_ONLY, REQUEST_SHAPES, SUPPLIED_BY_CLOUDFORMATION, check_template
from cfn_lint_check import stack_templates


def _templates(synth) -> list[pathlib.Path]:
    return [t.path for t in stack_templates(pathlib.Path(synth.app.synth().directory))]


def test_every_sagemaker_and_scaling_property_matches_the_api_model(every_assembly):
    findings, checked, types = [], 0, collections.Counter()
    for name, assembly in every_assembly.items():
        for path in [t.path for t in stack_templates(assembly.directory)]:
            template = json.loads(path.read_text())
            report = check_template(template)
            findings += [f"{name} {path.name}: {f}" for f in report.findings]
            checked += report.checked
            types.update(r["Type"] for r in template["Resources"].values() if r["Type"] in REQUEST_SHAPES)
    assert findings == []
    # Every resource type the app makes was checked (inference components too, since their example), 2034
    # values in all when this was written without them.
    assert set(types) == set(REQUEST_SHAPES), types
    assert checked >= 2000, checked


def test_an_instance_type_the_api_does_not_list_is_reported(default_synth):
    # The twin: prod's classifier config on an instance type SageMaker does not have.
    [path] = [p for p in _templates(default_synth) if p.parent.name == "assembly-TritonProd" and "classifier" in p.name]
    template = json.loads(path.read_text())
    [(config_id, config)] = [(k, r) for k, r in template["Resources"].items()
                             if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    config["Properties"]["ProductionVariants"][0]["InstanceType"] = "ml.g5.huge"
    enum = api_model_check.shapes("sagemaker")["ProductionVariantInstanceType"]["enum"]
    assert check_template(template).findings == [
        f"{config_id} (AWS::SageMaker::EndpointConfig): ProductionVariants[0].InstanceType: 'ml.g5.huge' is not one "
        f"of the {len(enum)} values of ProductionVariantInstanceType"]


def test_ranges_patterns_members_and_map_keys_are_checked(default_synth):
    # One planted defect of each other kind, each reported once, nothing else.
    [path] = [p for p in _templates(default_synth) if p.parent.name == "assembly-TritonProd" and "classifier" in p.name]
    template = json.loads(path.read_text())
    resources = {r["Type"]: (k, r["Properties"]) for k, r in copy.deepcopy(template)["Resources"].items()}
    config_id, config = resources["AWS::SageMaker::EndpointConfig"]
    config["ProductionVariants"][0].update(ContainerStartupHealthCheckTimeoutInSeconds=5000, Weight=1)
    endpoint_id, endpoint = resources["AWS::SageMaker::Endpoint"]
    endpoint["EndpointName"] = "Triton_prod"
    endpoint["ExcludeRetainedVariantProperties"][0]["VariantPropertyType"] = "InstanceCount"
    model_id, model = resources["AWS::SageMaker::Model"]
    model["PrimaryContainer"]["Environment"]["1_BAD"] = "x"
    planted = {"Resources": {k: {"Type": t, "Properties": p} for t, (k, p) in resources.items()}}
    config_at, endpoint_at = f"{config_id} (AWS::SageMaker::EndpointConfig)", f"{endpoint_id} (AWS::SageMaker::Endpoint)"
    assert sorted(check_template(planted).findings) == sorted([
        f"{config_at}: ProductionVariants[0].ContainerStartupHealthCheckTimeoutInSeconds: 5000 is outside 60..3600 "
        "(ProductionVariantContainerStartupHealthCheckTimeoutInSeconds)",
        f"{config_at}: ProductionVariants[0].Weight: not a member of ProductionVariant (members: "
        f"{', '.join(sorted(api_model_check.shapes('sagemaker')['ProductionVariant']['members']))})",
        f"{endpoint_at}: EndpointName: 'Triton_prod' does not match EndpointName's pattern "
        "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        f"{endpoint_at}: ExcludeRetainedVariantProperties[0].VariantPropertyType: 'InstanceCount' is not one of "
        "the 3 values of VariantPropertyType",
        f"{model_id} (AWS::SageMaker::Model): PrimaryContainer.Environment key '1_BAD': '1_BAD' does not match "
        "EnvironmentKey's pattern [a-zA-Z_][a-zA-Z0-9_]*"])


def test_cloudformation_only_properties_are_exactly_those_the_resource_schemas_add():
    # Each property CloudFormation's resource schema has and the request shape lacks is listed with its reason,
    # so none is skipped unseen; one that gets an API member (or a new one) fails here.
    for type_, (service, request) in REQUEST_SHAPES.items():
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", type_).schema
        read_only = {p.split("/")[-1] for p in schema.get("readOnlyProperties", [])}
        members = api_model_check.shapes(service)[request]["members"]
        assert set(schema["properties"]) - set(members) - read_only == {
            name for t, name in CLOUDFORMATION_ONLY if t == type_}, type_
        for (t, name), only in CLOUDFORMATION_ONLY.items():
            if t == type_ and only.shape:
                assert name in api_model_check.shapes(service)[only.shape]["members"], (type_, name)
    # What CloudFormation fills in is a required member of the request.
    for (type_, name) in SUPPLIED_BY_CLOUDFORMATION:
        service, request = REQUEST_SHAPES[type_]
        assert name in api_model_check.shapes(service)[request]["required"], (type_, name)


def test_the_models_java_patterns_translate():
    # Every pattern of a shape the request shapes reach compiles, and the Java-only constructs mean what Java
    # means by them (java.util.regex.Pattern: \p{Print} is ASCII 0x20-0x7E; a surrogate-pair range is U+10000..).
    for service, request in set(REQUEST_SHAPES.values()) | {("sagemaker", "UpdateEndpointInput")}:
        model, todo, seen = api_model_check.shapes(service), [request], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            shape = model[name]
            todo += [m["shape"] for m in shape.get("members", {}).values()]
            todo += [shape[k]["shape"] for k in ("member", "key", "value") if k in shape]
            if "pattern" in shape:
                api_model_check.java_pattern(shape["pattern"])
    printable = api_model_check.java_pattern(r"\p{Print}+")
    assert printable.fullmatch("Triton-prod GPU ~") and not printable.fullmatch("tab\there")
    text = api_model_check.java_pattern(r"[\u0020-\uD7FF\uE000-\uFFFD\uD800\uDC00-\uDBFF\uDFFF\r\n\t]*")
    assert text.fullmatch("ok \U0001F600\n") and not text.fullmatch("\x00")
    tag = api_model_check.java_pattern(r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)")
    assert tag.fullmatch("Équipe 7: ml/dev") and not tag.fullmatch("a;b")
