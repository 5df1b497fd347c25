"""kind: inference-components in the spec: every rule's exact message, the rules as plain functions, and the
resolved settings the CDK app and the clients share.

Each case mutates the example (examples/inference-components.yaml, one plain environment) in one way.
"""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError, load_spec
from deployment_spec.facts import component_rules as rules
from deployment_spec.rules.component_endpoint import capacity, component_name, demand
from deployment_spec.spec import parse_spec
from spec_mutations import all_of as _both, set_path as _set

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "inference-components.yaml"
BASE = {**yaml.safe_load(EXAMPLE.read_text()), "environments": {"dev": {"region": "us-east-1"}}}
EP = "endpoints.shared-gpu"


def _component(model: str, field: str, value):
    return _set(f"{EP}.components.{model}.{field}", value)


def _environment(name: str, body: dict):
    return lambda raw: raw["environments"].__setitem__(name, body)


CASES = {
    "a copy needs more GPUs than the instance has": (
        _component("bert", "reservation.gpus", 8),
        f"{EP}.components.bert.reservation.gpus: got 8; allowed: at most the 4 GPU(s) of one ml.g5.12xlarge; "
        "fix: reserve fewer GPUs per copy or choose an instance type with more GPUs"),
    "a copy needs more cores than the instance has": (
        _component("bert", "reservation.cpu_cores", 64),
        f"{EP}.components.bert.reservation.cpu_cores: got 64; allowed: at most the 48 vCPUs of one ml.g5.12xlarge; "
        "fix: reserve fewer cores per copy or choose a larger instance type"),
    "a copy needs more memory than the instance has": (
        _component("bert", "reservation.memory_mb", 300000),
        f"{EP}.components.bert.reservation.memory_mb: got 300000; allowed: at most the 196608 MB (192 GiB) of one "
        "ml.g5.12xlarge; fix: reserve less memory per copy or choose a larger instance type"),
    "the initial copies can never be placed": (
        _both(_component("resnet50", "copies", 7), _component("resnet50", "scaling.max_copies", 7)),
        f"{EP}.components.*.copies: got resnet50 7 x 1 + bert 1 x 1 + text-classifier 1 x 1 = 9 GPUs; allowed: at "
        "most 8 GPUs: managed_instances.max_instances (2) x 4 per ml.g5.12xlarge; fix: lower copies or the "
        "reservations, or raise managed_instances.max_instances"),
    "the scaling maximum can never be placed": (
        _component("bert", "scaling.max_copies", 5),
        f"{EP}.components.*.scaling.max_copies: got resnet50 3 x 1 + bert 5 x 1 + text-classifier 2 x 1 = 10 GPUs; "
        "allowed: at most 8 GPUs: managed_instances.max_instances (2) x 4 per ml.g5.12xlarge; fix: lower max_copies "
        "or the reservations, or raise managed_instances.max_instances"),
    "a fallback pool whose instances cannot hold a copy": (
        _both(_set(f"{EP}.instance_type", "ml.g5.24xlarge"), _component("bert", "reservation.cpu_cores", 64)),
        f"{EP}.fallback_instance_types[0].components.bert.reservation.cpu_cores: got 64; allowed: at most the 48 "
        "vCPUs of one ml.g6.12xlarge; fix: reserve fewer cores per copy or choose a larger instance type"),
    "a copy schedule above the component's scaling ceiling": (
        _component("resnet50", "scaling.schedules", [{"name": "peak", "schedule": "cron(0 8 ? * MON-FRI *)",
                                                     "min_copies": 4}]),
        f"{EP}.components.resnet50.scaling.schedules[0]: got bounds 4..3 from then on; allowed: min_copies <= "
        "max_copies <= the component's scaling.max_copies (3); fix: lower the schedule's bounds, or raise "
        "scaling.max_copies"),
    "zero instances while a component keeps a copy": (
        _set(f"{EP}.managed_instances.min_instances", 0),
        f"{EP}.managed_instances.min_instances: got 0; allowed: 0 only when every component may reach zero copies "
        "(scaling.min_copies: 0); resnet50 keeps 1, bert keeps 1, text-classifier keeps 1; fix: set "
        "scaling.min_copies: 0 on those components, or min_instances to 1 or more"),
    "zero instances on a variant endpoint": (
        _both(_set(f"{EP}.kind", "single-model"), _set(f"{EP}.models", ["resnet50"]),
              lambda raw: raw["endpoints"]["shared-gpu"].pop("components"),
              lambda raw: raw["endpoints"]["shared-gpu"].pop("managed_instances"),
              lambda raw: raw["endpoints"]["shared-gpu"].pop("rolling_update"),
              _set(f"{EP}.scaling", {"min_instances": 0, "max_instances": 2})),
        f"{EP}.scaling.min_instances: got 0; allowed: 1 or more on a real-time variant endpoint: an endpoint "
        "scales to zero instances only when it hosts inference components "
        "(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html) or serves "
        "asynchronously; fix: raise min_instances to 1, add an asynchronous block, or use kind: inference-components "
        "with managed_instances.min_instances: 0"),
    "a component at zero copies in production": (
        _both(_component("bert", "scaling.min_copies", 0), _set(f"{EP}.initial_instances", 2),
              _set(f"{EP}.managed_instances", {"min_instances": 2, "max_instances": 2}),
              _environment("dev", {"region": "us-east-1", "production": True})),
        f"{EP}.components.bert.scaling.min_copies: got 0; allowed: 1 or more in environment dev (production: true): "
        "at zero copies requests fail with NoCapacityInvocationFailures for the minutes a new copy takes to start "
        "(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html); fix: set "
        "scaling.min_copies: 1 under environments.dev.overrides.endpoints.shared-gpu.components.bert"),
    "one instance in production": (
        _environment("dev", {"region": "us-east-1", "production": True}),
        f"{EP}.managed_instances.min_instances: got 1; allowed: 2 or more in environment dev (production: true), so "
        "that SageMaker can place the instances in different Availability Zones (AWS Config rule "
        "SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT); fix: set initial_instances and "
        "managed_instances.min_instances to 2 under environments.dev.overrides.endpoints.shared-gpu, or give "
        "single_instance_reason there"),
    "settings for a model the endpoint does not serve": (
        _set(f"{EP}.components.berta", {"copies": 1}),
        f"{EP}.components.berta: got 'berta'; allowed: a model listed under {EP}.models (resnet50, bert, "
        "text-classifier); fix: did you mean 'bert'?"),
    "component settings on a multi-model endpoint": (
        lambda raw: raw["endpoints"].__setitem__("mme", {
            "kind": "multi-model", "models": ["resnet50"], "components": {"resnet50": {"copies": 2}}}),
        "endpoints.mme.components: got a setting of inference components; allowed: nothing on a multi-model "
        "endpoint; fix: remove components, or set kind: inference-components"),
    "variant scaling on an inference-components endpoint": (
        _set(f"{EP}.scaling", {"min_instances": 1, "max_instances": 2}),
        f"{EP}.scaling: got a setting; allowed: nothing on an inference-components endpoint; fix: use "
        "components.<model>.scaling (copies per component) and managed_instances (instances)"),
    "a default model on an inference-components endpoint": (
        _set(f"{EP}.default_model", "bert"),
        f"{EP}.default_model: got a setting; allowed: nothing on an inference-components endpoint; fix: remove it "
        "(nothing: each component serves its own model; callers name the component)"),
    "two per-copy targets": (
        _component("bert", "scaling.invocations_per_copy", 600),
        f"{EP}.components.bert.scaling.invocations_per_copy: got both of invocations_per_copy and "
        "concurrent_requests_per_copy; allowed: exactly one per-copy target (SageMakerInferenceComponentInvocations"
        "PerCopy, or SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution); fix: keep one: "
        "invocations per copy per minute, or in-flight requests per copy"),
    "initial copies outside the scaling range": (
        _component("bert", "copies", 3),
        f"{EP}.components.bert.copies: got 3; allowed: an integer within scaling.min_copies..scaling.max_copies "
        "(1..2); fix: move copies into that range or widen the range"),
    "min copies above max copies": (
        _component("bert", "scaling.min_copies", 3),
        f"{EP}.components.bert.scaling.max_copies: got 2; allowed: an integer >= min_copies (3); fix: raise "
        "max_copies or lower min_copies"),
    "a memory limit below the reservation": (
        _component("bert", "reservation.max_memory_mb", 4096),
        f"{EP}.components.bert.reservation.max_memory_mb: got 4096; allowed: at least memory_mb (8192); fix: raise "
        "max_memory_mb or lower memory_mb"),
    "initial instances outside the managed bounds": (
        _set(f"{EP}.initial_instances", 3),
        f"{EP}.initial_instances: got 3; allowed: an integer within 1..managed_instances.max_instances (1..2); an "
        "endpoint starts with at least one instance even when it may scale to zero; fix: move initial_instances "
        "into that range or widen managed_instances"),
    "a GPU model without a GPU reservation": (
        _component("resnet50", "reservation.gpus", 0),
        f"{EP}.components.resnet50.reservation.gpus: got 0; allowed: 1 or more for a model with instance_groups of "
        "kind gpu; fix: reserve a GPU, or use instance_groups kind cpu or auto"),
    "renamed model copies on an inference-components endpoint": (
        _set("models.resnet50.copies", 2),
        "models.resnet50.copies: got 2; allowed: 1 on an inference-components endpoint (shared-gpu); fix: set "
        f"{EP}.components.resnet50.copies instead (each copy is a container)"),
    "a rolling update that cannot finish in time": (
        _both(_set(f"{EP}.rolling_update.max_execution_timeout_s", 1200),
              _environment("dev", {"region": "us-east-1", "guardrails": True})),
        f"{EP}.rolling_update.max_execution_timeout_s: got 1200; allowed: at least 3000 s: 2 batch(es) of 50 % x "
        "(copy start 1200 s + wait_s 300); fix: raise it, or leave it out to have it computed"),
    "a component name SageMaker refuses": (
        _both(lambda raw: raw["models"].__setitem__("text_classifier", raw["models"].pop("text-classifier")),
              _set(f"{EP}.models", ["resnet50", "bert", "text_classifier"]),
              lambda raw: raw["endpoints"]["shared-gpu"]["components"].__setitem__(
                  "text_classifier", raw["endpoints"]["shared-gpu"]["components"].pop("text-classifier"))),
        f"{EP}.models: got the inference component name 'Shared-dev-shared-gpu-text_classifier' (environment dev); "
        "allowed: <project>-<environment>-<endpoint>-<model> of 1-63 letters, digits or '-'; fix: rename the model or "
        "endpoint (no '_') or shorten the project, environment or endpoint name"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_invalid_component_spec_is_rejected_with_its_exact_message(name):
    mutate, expected = CASES[name]
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    # Exactly one problem, rendered with path, value, what is allowed and the fix.
    assert str(caught.value) == f"spec.yaml: 1 problem\n  - {expected}"


def test_every_component_problem_is_listed_at_once():
    raw = copy.deepcopy(BASE)
    for mutate, _ in (CASES["a copy needs more GPUs than the instance has"],
                      CASES["initial instances outside the managed bounds"],
                      CASES["zero instances while a component keeps a copy"]):
        mutate(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    assert sorted(p.path for p in caught.value.problems) == [
        f"{EP}.components.bert.reservation.gpus", f"{EP}.initial_instances", f"{EP}.managed_instances.min_instances"]


def test_the_example_scales_to_zero_in_dev_only():
    spec = load_spec(EXAMPLE)
    dev, prod = (spec.environments[e].endpoints["shared-gpu"] for e in ("dev", "prod"))
    # dev: no instance and no copy when idle; prod keeps two instances and two copies of each model.
    assert dev.instance_bounds.min_instances == 0 and all(dev.component(m).min_copies == 0 for m in dev.models)
    assert prod.instance_bounds.min_instances == 2 and all(prod.component(m).min_copies == 2 for m in prod.models)


def test_component_names_and_reservations_resolve_once_for_every_caller():
    spec = load_spec(EXAMPLE)
    endpoint = spec.environments["staging"].endpoints["shared-gpu"]
    # The name callers pass as InferenceComponentName, and what one copy of the ensemble reserves.
    assert component_name(spec.project, "staging", "shared-gpu", "text-classifier") == \
        "Shared-staging-shared-gpu-text-classifier"
    assert demand(endpoint, "text-classifier") == rules.Demand("text-classifier", 1, 8, 16384, 1)
    assert capacity("ml.g5.12xlarge") == rules.InstanceCapacity("ml.g5.12xlarge", 4, 48, 192)


def test_gpus_default_to_one_on_gpu_types_and_none_on_cpu_types():
    raw = copy.deepcopy(BASE)
    raw["endpoints"]["shared-gpu"]["components"]["bert"]["reservation"].pop("gpus")
    spec = parse_spec(raw, pathlib.Path("spec.yaml"))
    assert demand(spec.endpoints["shared-gpu"], "bert").gpus == 1
    cpu = {**spec.endpoints["shared-gpu"].__dict__, "instance_type": "ml.m5.4xlarge"}
    assert demand(type(spec.endpoints["shared-gpu"])(**cpu), "bert").gpus == 0


def test_placement_totals_are_a_necessary_condition_only():
    four_gpus = rules.InstanceCapacity("ml.g5.12xlarge", 4, 48, 192)
    three_gpu_copies = [rules.Demand("a", 3, None, 1024, 2), rules.Demand("b", 2, None, 1024, 1)]
    # 3 + 3 + 2 = 8 GPUs fit two 4-GPU instances by the totals, though no packing exists: not reported,
    # because the rule only reports what can certainly never be placed.
    assert rules.copies_placeable(three_gpu_copies, four_gpus, 2, "copies", "max_instances") == []
    assert rules.copies_placeable(three_gpu_copies, four_gpus, 1, "copies", "max_instances") != []


def test_an_archive_with_several_models_needs_its_default():
    # The Triton container exits when several top-level model directories have no default (serve script).
    assert [str(p) for p in rules.default_model_required(["text-classifier", "preprocess", "bert"], None)] == [
        "default_model: got nothing; allowed: one of the archive's models (text-classifier, preprocess, bert); "
        "fix: name the model callers reach (an ensemble, not one of its steps)"]
    assert [str(p) for p in rules.default_model_required(["resnet50"], "bert")] == [
        "default_model: got 'bert'; allowed: one of the archive's models (resnet50); fix: name a model directory at "
        "the top of the archive"]
    assert rules.default_model_required(["resnet50"], None) == []


def test_rolling_update_timeout_is_computed_to_cover_every_batch():
    spec = load_spec(EXAMPLE)
    endpoint = spec.environments["staging"].endpoints["shared-gpu"]
    # 2 batches of 50 % x (600 s download + 600 s health check + 300 s bake) = 3000 s.
    assert endpoint.rolling_update.timeout_s(endpoint.fleet_start_s) == 3000
