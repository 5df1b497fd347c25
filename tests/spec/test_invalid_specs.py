"""Every invalid spec is rejected with one message naming the field, the value, what is allowed and the fix.

Each case mutates a copy of the default spec (triton.yaml) in one way.
"""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.spec import parse_spec
from spec_mutations import all_of as _both, set_path as _set
ROOT = pathlib.Path(__file__).resolve().parents[2]

BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())


def _add_model(name, like):
    return lambda raw: raw["models"].__setitem__(name, copy.deepcopy(raw["models"][like]))


def _step_model(index, name):
    return lambda raw: raw["models"]["text-classifier"]["ensemble"]["steps"][index].__setitem__("model", name)


CASES = {
    "instance pools on a multi-model endpoint": (
        _set("endpoints.vision-nlp.fallback_instance_types", ["ml.g4dn.xlarge"]),
        "endpoints.vision-nlp.fallback_instance_types: got 1 fallback type(s) on a multi-model endpoint; allowed: "
        "instance pools on single-model endpoints and inference components only (realtime-endpoints-heterogeneous.html); "
        "fix: remove fallback_instance_types"),
    "a fallback pool with another GPU count": (
        _set("endpoints.classifier.fallback_instance_types", ["ml.g6.12xlarge"]),
        "endpoints.classifier.fallback_instance_types[0]: got ml.g6.12xlarge (4 GPU(s)); allowed: a type with the 1 "
        "GPU(s) of instance_type ml.g5.xlarge: scaling targets and alarms are per GPU x GPUs; fix: pick a size with 1 "
        "GPU(s)"),
    "a capacity reservation of another instance type": (
        _set("endpoints.classifier.capacity_reservation", {
            "arn": "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/plan-1", "instance_type": "ml.g6.xlarge",
            "instances": 8}),
        "endpoints.classifier.capacity_reservation.instance_type: got 'ml.g6.xlarge'; allowed: the endpoint's "
        "instance_type ml.g5.xlarge: instances launch only into the reservation (capacity-reservations-only); fix: run "
        "the endpoint on the reserved type, or name the reservation that holds its type"),
    "scaling on concurrency with an invocations target": (
        _set("endpoints.classifier.scaling.load_metric", "concurrency"),
        "endpoints.classifier.scaling.max_rps_per_instance: got 30; allowed: no invocations target with load_metric: "
        "concurrency; fix: remove max_rps_per_instance, or set load_metric: invocations"),
    "scaling on concurrency on a multi-model endpoint": (
        _set("endpoints.vision-nlp.scaling", {"max_instances": 2, "load_metric": "concurrency"}),
        "endpoints.vision-nlp.scaling.load_metric: got concurrency on a multi-model endpoint; allowed: invocations "
        "(the concurrency metric is per model of a single-model endpoint); fix: remove scaling.load_metric"),
    "a schedule that lifts the minimum above the scaling ceiling": (
        _set("endpoints.classifier.scaling.schedules", [{"name": "office", "schedule": "cron(0 8 ? * MON-FRI *)",
                                                         "time_zone": "Europe/Berlin", "min_instances": 5}]),
        "endpoints.classifier.scaling.schedules[0]: got bounds 5..3 from then on; allowed: min_instances <= "
        "max_instances <= the endpoint's scaling.max_instances (3); fix: lower the schedule's bounds, or raise "
        "scaling.max_instances"),
    "Triton metrics port outside SageMaker's safe range": (
        _set("endpoints.classifier.container", {"metrics_port": 8002}),
        "endpoints.classifier.container.metrics_port: got 8002; allowed: a port in 23000-23999: SageMaker gives the "
        "container SAGEMAKER_SAFE_PORT_RANGE and tritonserver exits at start when its metrics port lies outside it "
        "(src/command_line_parser.cc, r25.09); fix: use 23000 (the default), or leave metrics_port out"),
    "metrics publish frequency SageMaker does not offer": (
        _set("endpoints.classifier.observability", {"publish_frequency_s": 45}),
        "endpoints.classifier.observability.publish_frequency_s: got 45; allowed: one of 10, 30, 60, 120, 180, 240, "
        "300 (MetricsConfig.MetricPublishFrequencyInSeconds); fix: pick the nearest of those"),
    "graphs of Triton's metrics without detailed observability": (
        _set("endpoints.classifier.observability", {"graphs": True, "detailed": False}),
        "endpoints.classifier.observability.graphs: got true with detailed: false; allowed: graphs with detailed: "
        "true (SageMaker publishes Triton's metrics only with detailed observability); fix: set detailed: true or "
        "remove graphs"),
    "graphs of Triton's metrics with Triton's metrics off": (
        _both(_set("endpoints.classifier.container", {"metrics": False}),
              _set("endpoints.classifier.observability", {"graphs": True})),
        "endpoints.classifier.observability.graphs: got true with container.metrics: false; allowed: graphs with "
        "container.metrics: true (Triton's metrics are what they draw); fix: set container.metrics: true or remove "
        "graphs"),
    "enhanced metrics on a multi-model endpoint": (
        _set("endpoints.vision-nlp.observability", {"enhanced": True}),
        "endpoints.vision-nlp.observability.enhanced: got true on a multi-model endpoint; allowed: single-model and "
        "inference-component endpoints only (EnableEnhancedMetrics); fix: remove observability.enhanced"),
    "unknown key, closest suggested": (
        _set("models.bert.max_batch_sise", 4),
        "models.bert.max_batch_sise: got unknown key 'max_batch_sise'; allowed: backend, source, weights, "
        "max_batch_size, sequence_length, dynamic_batching, instance_groups, precision, onnxruntime, tensorrt, "
        "python, ensemble, dali, copies, warmup, tolerance, int8, inputs, outputs, samples, task; fix: did you mean "
        "'max_batch_size'?"),
    "quoted integer": (
        _set("models.bert.max_batch_size", "16"),
        "models.bert.max_batch_size: got '16'; allowed: an integer from 0 to 4096; fix: write an integer without quotes"),
    "a whole number written with a decimal point": (
        _set("models.bert.max_batch_size", 16.0),
        "models.bert.max_batch_size: got 16.0; allowed: an integer from 0 to 4096; fix: write 16: an integer has no "
        "decimal point"),
    "a fraction where an integer goes": (
        _set("models.bert.max_batch_size", 7.5),
        "models.bert.max_batch_size: got 7.5; allowed: an integer from 0 to 4096; fix: write a whole number, e.g. 8"),
    "a real backend this tool does not build: no look-alike suggested": (
        _set("models.bert.backend", "tensorflow"),
        "models.bert.backend: got 'tensorflow'; allowed: tensorrt, onnxruntime, pytorch, python, ensemble, dali; fix: "
        "use one of tensorrt, onnxruntime, pytorch, python, ensemble, dali"),
    "a misspelt endpoint key is reported once, not again under each environment that overrides the endpoint": (
        _set("endpoints.classifier.instanse_type", "ml.g5.xlarge"),
        "endpoints.classifier.instanse_type: got unknown key 'instanse_type'; allowed: kind, models, default_model, "
        "instance_type, image_repository, instance_facts, fallback_instance_types, capacity_reservation, "
        "initial_instances, variant_name, scaling, alarms, deployment, container, observability, model_cache, "
        "data_capture, asynchronous, variants, shadow, comparison, network, volume_size_gb, startup_timeout_s, "
        "download_timeout_s, single_instance_reason, components, managed_instances, rolling_update; fix: did you mean "
        "'instance_type'?"),
    "unquoted version parsed as a number": (
        _set("triton_version", 25.04),
        'triton_version: got 25.04 (not a string); allowed: a string; fix: quote the value: "25.04"'),
    "unknown Triton release": (
        _set("triton_version", "24.12"),
        "triton_version: got '24.12'; allowed: a sagemaker-tritonserver release of the SageMaker SDK "
        "(23.12, 24.01, 24.03, 24.05, 24.09, 25.04, 25.09, 26.05); fix: pick one of those tags"),
    "min above max": (
        _both(_set("endpoints.vision-nlp.scaling.min_instances", 5), _set("endpoints.vision-nlp.scaling.max_instances", 2)),
        "endpoints.vision-nlp.scaling.max_instances: got 2; allowed: an integer >= min_instances (5); "
        "fix: raise max_instances or lower min_instances"),
    "initial outside the scaling range": (
        _set("endpoints.vision-nlp.initial_instances", 9),
        "endpoints.vision-nlp.initial_instances: got 9; allowed: an integer within "
        "scaling.min_instances..scaling.max_instances (1..4); fix: move initial_instances into that range or widen the range"),
    "burstable type with auto-scaling": (
        _set("endpoints.classifier.instance_type", "ml.t2.medium"),
        "endpoints.classifier.scaling: got auto-scaling on ml.t2.medium; allowed: no auto-scaling on burstable ml.t* "
        "types; fix: remove scaling or use a non-burstable type such as ml.c5.xlarge"),
    "SME with two models and no default": (
        _set("endpoints.classifier.models", ["text-classifier", "resnet50"]),
        "endpoints.classifier.default_model: got nothing; allowed: one of text-classifier, resnet50; fix: a "
        "single-model endpoint with several models needs default_model (it becomes SAGEMAKER_TRITON_DEFAULT_MODEL_NAME)"),
    "ensemble step names an undeclared model": (
        _step_model(1, "bret"),
        "models.text-classifier.ensemble.steps[1].model: got 'bret'; allowed: a name declared under models: "
        "(resnet50, bert, preprocess, text-classifier); fix: did you mean 'bert'?"),
    "model name not a Triton name / S3 key segment": (
        _add_model("bert/v2", "bert"),
        "models.bert/v2: got the name 'bert/v2'; allowed: 1-63 letters, digits, '-' or '_', starting with a letter "
        "or digit; fix: rename it"),
    "renamed copy clashes with another model on the endpoint": (
        _both(_set("models.resnet50.copies", 2), _add_model("resnet50-1", "bert"),
              _set("endpoints.vision-nlp.models", ["resnet50", "bert", "resnet50-1"])),
        "endpoints.vision-nlp.models: got the Triton name 'resnet50-1' from both resnet50 and resnet50-1; "
        "allowed: unique Triton model names per endpoint; fix: rename one model or change its copies"),
    "MME on an instance family without multi-model support": (
        _set("endpoints.vision-nlp.instance_type", "ml.g6.xlarge"),
        "endpoints.vision-nlp.instance_type: got 'ml.g6.xlarge'; allowed: a CPU type or a GPU family SageMaker "
        "lists for multi-model endpoints (p2, p3, g4dn, g5); fix: pick an ml.g5 or ml.g4dn size, or make the "
        "endpoint single-model"),
    "MME on a multi-GPU type": (
        _set("endpoints.vision-nlp.instance_type", "ml.g5.12xlarge"),
        "endpoints.vision-nlp.instance_type: got 'ml.g5.12xlarge'; allowed: a single-GPU instance type for a "
        "multi-model endpoint; fix: use a single-GPU size such as ml.g5.2xlarge"),
    "Triton version absent from the region": (
        _both(_set("triton_version", "26.05"), _set("environments.dev.region", "cn-north-1")),
        "environments.dev.region: got 'cn-north-1'; allowed: a region with sagemaker-tritonserver:26.05-py3 "
        "(af-south-1, ap-east-1, ap-east-2, ap-northeast-1, ap-northeast-2, ap-northeast-3, ap-south-1, ap-south-2, "
        "ap-southeast-1, ap-southeast-2, ap-southeast-3, ap-southeast-4, ap-southeast-5, ap-southeast-6, "
        "ap-southeast-7, ca-central-1, ca-west-1, eu-central-1, eu-central-2, eu-north-1, eu-south-1, eu-south-2, "
        "eu-west-1, eu-west-2, eu-west-3, il-central-1, me-central-1, me-south-1, mx-central-1, sa-east-1, "
        "us-east-1, us-east-2, us-west-1, us-west-2); fix: choose one of those regions or another triton_version"),
    "enum typo": (
        _set("models.bert.backend", "onnx-runtime"),
        "models.bert.backend: got 'onnx-runtime'; allowed: tensorrt, onnxruntime, pytorch, python, ensemble, dali; "
        "fix: did you mean 'onnxruntime'?"),
    "environment override breaks a cross-field rule": (
        _set("environments.prod.overrides.endpoints.vision-nlp.scaling.max_instances", 1),
        "environments.prod.overrides.endpoints.vision-nlp.scaling.max_instances: got 1; allowed: an integer >= "
        "min_instances (2); fix: raise max_instances or lower min_instances"),
    "override names an unknown endpoint": (
        _set("environments.prod.overrides.endpoints.clasifier", {}),
        "environments.prod.overrides.endpoints.clasifier: got 'clasifier'; allowed: a name declared under "
        "endpoints: (vision-nlp, classifier); fix: did you mean 'classifier'?"),
    "account without region": (
        _both(_set("environments.dev.account", "123456789012"), _set("environments.dev.region", None)),
        "environments.dev.region: got nothing; allowed: a region whenever account is set; fix: add region, or "
        "remove account for an environment-agnostic stage"),
    "unquoted account ID": (
        _set("environments.dev.account", 123456789012),
        'environments.dev.account: got 123456789012 (not a string); allowed: a string; fix: quote the value: '
        '"123456789012"'),
    "two sources": (
        _set("models.bert.source.onnx", "model.onnx"),
        "models.bert.source: got 2 sources (recipe, onnx); allowed: exactly one of recipe, onnx, torchscript, "
        "python_dir; fix: keep one source key"),
    "recipe served by a backend it cannot feed": (
        _set("models.preprocess.backend", "onnxruntime"),
        "models.preprocess.backend: got 'onnxruntime'; allowed: python for recipe text-preprocess; "
        "fix: set backend to python"),
    "preferred batch size above max_batch_size": (
        _set("models.bert.dynamic_batching.preferred_batch_sizes", [4, 64]),
        "models.bert.dynamic_batching.preferred_batch_sizes: got [64]; allowed: sizes <= max_batch_size (16); "
        "fix: lower them or raise max_batch_size"),
    "renamed copies on a single-model endpoint": (
        _set("models.preprocess.copies", 2),
        "models.preprocess.copies: got 2; allowed: 1 on a single-model endpoint (classifier); "
        "fix: serve the copies from a multi-model endpoint"),
    "missing top-level section": (
        lambda raw: raw.pop("models"),
        "models: got nothing (the key is missing); allowed: a mapping of model name: settings; "
        "fix: add 'models:' at the top level"),
    "environment name not a CDK stage id": (
        _set("environments.prod-eu", {"region": "eu-west-1"}),
        "environments.prod-eu: got the name 'prod-eu'; allowed: letters and digits, starting with a letter "
        "(it names a CDK stage); fix: rename the environment"),
    "volume size on an NVMe instance type": (
        _set("endpoints.classifier.volume_size_gb", 100),
        "endpoints.classifier.volume_size_gb: got 100; allowed: nothing on ml.g5.xlarge: it has local NVMe "
        "storage; fix: remove volume_size_gb"),
    "data capture on an MME": (
        _set("endpoints.vision-nlp.data_capture", {"sampling_percent": 5}),
        "endpoints.vision-nlp.data_capture: got a data capture setting; allowed: single-model endpoints only; "
        "fix: remove data_capture or make the endpoint single-model"),
    "linear step outside SageMaker's range": (
        _set("endpoints.classifier.deployment", {"strategy": "linear", "linear_step_percent": 5}),
        "endpoints.classifier.deployment.linear_step_percent: got 5; allowed: an integer from 10 to 50; "
        "fix: set it within 10..50"),
    "GPU utilization target on a CPU instance": (
        _set("endpoints.classifier.scaling.gpu_utilization_target", 60),
        "endpoints.classifier.scaling.gpu_utilization_target: got 60.0; allowed: nothing on the CPU instance type "
        "ml.c5.xlarge; fix: remove it, or use cpu_utilization_target"),
}
CASES["GPU utilization target on a CPU instance"] = (
    _both(_set("endpoints.classifier.instance_type", "ml.c5.xlarge"), CASES["GPU utilization target on a CPU instance"][0]),
    CASES["GPU utilization target on a CPU instance"][1])

def _ensemble_cycle(raw):
    raw["models"]["ens2"] = {"backend": "ensemble", "max_batch_size": 16,
                             "ensemble": {"steps": [{"model": "text-classifier"}]}}
    raw["models"]["text-classifier"]["ensemble"]["steps"][0]["model"] = "ens2"


def _rename_endpoint(old, new):
    def mutate(raw):
        raw["endpoints"][new] = raw["endpoints"].pop(old)
        overrides = raw["environments"]["prod"]["overrides"]["endpoints"]
        if old in overrides:  # the override follows the endpoint (prod keeps 2 instances)
            overrides[new] = overrides.pop(old)
    return mutate


CASES.update({
    "ensembles calling each other": (
        _ensemble_cycle,
        "models.ens2.ensemble.steps[0].model: got 'text-classifier'; allowed: a model that does not lead back to "
        "this ensemble; fix: break the cycle text-classifier -> ens2 -> text-classifier"),
    "ensemble calling itself": (
        _step_model(0, "text-classifier"),
        "models.text-classifier.ensemble.steps[0].model: got 'text-classifier'; allowed: another declared model; "
        "fix: an ensemble cannot call itself"),
    "empty source path": (
        _set("models.bert.source", {"onnx": ""}),
        "models.bert.source.onnx: got an empty string; allowed: a recipe name or a path; "
        "fix: give onnx a value or remove the key"),
    "unquoted version does not crash the version rules": (
        _both(_set("triton_version", 25.04), _set("endpoints.classifier.instance_type", "ml.p3.2xlarge")),
        'triton_version: got 25.04 (not a string); allowed: a string; fix: quote the value: "25.04"'),
    "endpoint named like the storage stack": (
        _rename_endpoint("classifier", "Storage"),
        "endpoints.Storage: got the name 'Storage'; allowed: any name but 'Storage' (the storage stack of each "
        "stage has it); fix: rename the endpoint"),
    "two environments making one stage ID": (
        _set("environments.Dev", {"region": "us-east-1"}),
        "environments.Dev: got the stage ID 'TritonDev', also made by environment 'dev'; allowed: environment "
        "names that differ beyond their first letter's case; fix: rename one of the two environments"),
    "GPU instance group on a CPU instance type": (
        _both(_set("endpoints.vision-nlp.kind", "single-model"), _set("endpoints.vision-nlp.models", ["resnet50"]),
              _set("endpoints.vision-nlp.instance_type", "ml.c5.xlarge"),
              lambda raw: raw["endpoints"]["vision-nlp"]["scaling"].pop("gpu_utilization_target")),
        "models.resnet50.instance_groups: got kind gpu; allowed: kind cpu or auto on the CPU instance type "
        "ml.c5.xlarge (endpoint vision-nlp); fix: use kind: cpu (or auto), or a GPU instance type"),
    "not-a-number": (
        _set("endpoints.vision-nlp.scaling.max_rps_per_instance", float("nan")),
        "endpoints.vision-nlp.scaling.max_rps_per_instance: got nan; allowed: a finite number >= 0.001; "
        "fix: write a finite number"),
    "model cache setting on an SME": (
        _set("endpoints.classifier.model_cache", False),
        "endpoints.classifier.model_cache: got false; allowed: true (model caching is a multi-model setting); "
        "fix: remove model_cache"),
    "V100 with a Triton release that dropped it": (
        _set("endpoints.classifier.instance_type", "ml.p3.2xlarge"),
        "endpoints.classifier.instance_type: got 'ml.p3.2xlarge'; allowed: a GPU with compute capability >= 7.5 "
        "for Triton 25.09; fix: use ml.g4dn/ml.g5, or triton_version 24.09 or older"),
    "canary on a variant that can run one instance": (
        # staging runs vision-nlp down to 1 instance; a canary there would be 100 % of it.
        _set("endpoints.vision-nlp.deployment", {"strategy": "canary"}),
        "endpoints.vision-nlp.deployment.strategy: got canary; allowed: all_at_once or auto for a variant that can "
        "have 1 instance in environment staging (guardrails: true): a canary or linear step must be at most 50 % "
        "of the variant's instances; fix: use strategy all_at_once (blue/green with the bake time and "
        "auto-rollback) or auto, or give the endpoint 2+ instances (initial_instances, scaling.min_instances)"),
    "deployment timeout that leaves out the new fleet's start": (
        _set("environments.prod.overrides.endpoints.vision-nlp.deployment", {"max_execution_timeout_s": 1800}),
        "endpoints.vision-nlp.deployment.max_execution_timeout_s: got 1800; allowed: at least 1920 s in environment "
        "prod (guardrails: true): new fleet start (download_timeout_s 600 + startup_timeout_s 600) + 2 step(s) x "
        "wait_s 300 + termination_wait_s 120; fix: raise it, or leave it out to have it computed"),
    "network isolation turned off without a reason": (
        _set("endpoints.classifier.network", {"isolation": False}),
        "endpoints.classifier.network.isolation: got false; allowed: false only with isolation_opt_out_reason (why "
        "the container needs the network); fix: add isolation_opt_out_reason, e.g. 'model.py reads a feature store "
        "over HTTPS', or remove isolation: false (network isolation is on by default)"),
    "one instance in production": (
        _set("environments.prod.overrides.endpoints.classifier", {"scaling": {"max_instances": 6}}),
        "endpoints.classifier.scaling.min_instances: got 1; allowed: 2 or more in environment prod (production: "
        "true), so that SageMaker can place the instances in different Availability Zones (AWS Config rule "
        "SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT); fix: set initial_instances and scaling.min_instances to 2 "
        "under environments.prod.overrides.endpoints.classifier, or give single_instance_reason there"),
    "two invocation targets": (
        _set("endpoints.classifier.scaling.invocations_target", 500),
        "endpoints.classifier.scaling.invocations_target: got 500.0; allowed: either invocations_target or "
        "max_rps_per_instance, not both; fix: keep one: the target is derived as max_rps_per_instance x 60 x "
        "safety_factor"),
    "dynamic batching on an ensemble": (
        _set("models.text-classifier.dynamic_batching", {"max_queue_delay_us": 5}),
        "models.text-classifier.dynamic_batching: got a value; allowed: nothing: Triton rejects it on ensembles; "
        "fix: remove dynamic_batching here and set it on the step models"),
    "int8 on the Python backend": (
        _set("models.preprocess.precision", "int8"),
        "models.preprocess.precision: got 'int8'; allowed: int8 with backend onnxruntime or tensorrt; "
        "fix: use fp32 for this backend"),
    "an int8 gate on an fp32 model": (
        _set("models.bert.int8", {"min_cosine_similarity": 0.99}),
        "models.bert.int8: got int8 settings with precision fp32, backend onnxruntime; allowed: only with "
        "precision: int8 and backend: onnxruntime (the build's dynamic quantization is what they gate); "
        "fix: remove int8, or set precision: int8 with backend: onnxruntime"),
    "an int8 cosine bound above 1": (
        _both(_set("models.bert.precision", "int8"), _set("models.bert.int8", {"min_cosine_similarity": 1.5})),
        "models.bert.int8.min_cosine_similarity: got 1.5; allowed: a number from 0 to 1; fix: set it within 0..1"),
    "an int8 top-1 bound given as a percentage": (
        _both(_set("models.bert.precision", "int8"), _set("models.bert.int8", {"min_top1_agreement": 99})),
        "models.bert.int8.min_top1_agreement: got 99; allowed: a number from 0 to 1; fix: set it within 0..1"),
    "unknown ping mode": (
        _set("endpoints.classifier.container", {"ping_mode": "alive"}),
        "endpoints.classifier.container.ping_mode: got 'alive'; allowed: ready, live; fix: use ready or live"),
    "a VPC with one subnet": (
        _set("endpoints.classifier.network", {"subnet_ids": ["subnet-1"], "security_group_ids": ["sg-1"]}),
        "endpoints.classifier.network.subnet_ids: got 1 subnet; allowed: 2 to 16 subnets in different "
        "availability zones; fix: add a subnet in another zone"),
})



@pytest.mark.parametrize("name", list(CASES))
def test_invalid_spec_is_rejected_with_its_exact_message(name):
    mutate, expected = CASES[name]
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    # Exactly one problem, rendered with path, value, what is allowed and the fix.
    assert str(caught.value) == f"spec.yaml: 1 problem\n  - {expected}"


def test_every_problem_is_listed_at_once():
    raw = copy.deepcopy(BASE)
    _set("models.bert.max_batch_size", "16")(raw)
    _set("endpoints.classifier.instance_type", "ml.t2.medium")(raw)
    _set("triton_version", "24.12")(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    # Three unrelated mistakes come back together, in file order, under one header.
    assert [p.path for p in caught.value.problems] == [
        "triton_version", "models.bert.max_batch_size", "endpoints.classifier.scaling"]
    assert str(caught.value).startswith("spec.yaml: 3 problems\n  - triton_version: got '24.12'")


def test_an_invalid_model_body_does_not_cascade_into_reference_errors():
    raw = copy.deepcopy(BASE)
    _set("models.bert.backend", "onnx-runtime")(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    # The endpoint and the ensemble still name 'bert'; only the real mistake is reported.
    assert len(caught.value.problems) == 1


def test_endpoint_name_must_make_a_valid_sagemaker_endpoint_name():
    raw = copy.deepcopy(BASE)
    _rename_endpoint("classifier", "my_endpoint")(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    # '_' is valid in a Triton name but not in <project>-<environment>-<endpoint>; reported once, not per environment.
    assert str(caught.value) == (
        "spec.yaml: 1 problem\n  - endpoints.my_endpoint: got the SageMaker endpoint name 'Triton-dev-my_endpoint' "
        "(<project>-<environment>-<endpoint>, environment dev); allowed: 1-63 letters, digits or '-' (a SageMaker "
        "endpoint name); fix: rename the endpoint (no '_') or shorten the project or environment name")


def test_one_instance_in_production_with_a_reason_is_accepted():
    raw = copy.deepcopy(BASE)
    raw["environments"]["prod"]["overrides"]["endpoints"]["classifier"] = {
        "scaling": {"max_instances": 6}, "single_instance_reason": "internal batch tool; a zone outage may wait"}
    spec = parse_spec(raw, pathlib.Path("spec.yaml"))
    assert spec.environments["prod"].endpoints["classifier"].scaling.min_instances == 1


def test_an_int8_gate_is_accepted_and_precision_int8_alone_gets_none():
    raw = copy.deepcopy(BASE)
    raw["models"]["bert"].update(precision="int8", int8={"min_cosine_similarity": 0.995, "min_top1_agreement": 1})
    raw["models"]["resnet50"]["precision"] = "int8"
    spec = parse_spec(raw, pathlib.Path("spec.yaml"))
    assert (spec.models["bert"].int8.min_cosine_similarity, spec.models["bert"].int8.min_top1_agreement) == (0.995, 1.0)
    # No int8 section: the build applies the defaults of deployment_spec.sections.model.Int8Gate (cosine >= 0.98).
    assert spec.models["resnet50"].int8 is None
