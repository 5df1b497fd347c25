"""``variants:`` (weighted production variants) and ``shadow:`` in the spec: every refusal's exact message, at its
spec path, and the environment overrides that add or remove them.

Each case mutates one plain spec (two Python-backend models, one single-model endpoint) in one way.
"""
from __future__ import annotations

import copy
import pathlib

import pytest

from deployment_spec import SpecError
from deployment_spec.facts.instances import BOTOCORE_VERSION, INSTANCE_TYPES
from deployment_spec.spec import parse_spec
from deployment_spec.rules.variant_plan import build_for, describe_weights, endpoints_to_build
from spec_mutations import all_of, set_path

EP = "endpoints.ep"
BASE = {
    "project": "Demo",
    "triton_version": "25.04",
    "models": {
        "incumbent": {"backend": "python", "source": {"python_dir": "incumbent"}, "max_batch_size": 4},
        "candidate": {"backend": "python", "source": {"python_dir": "candidate"}, "max_batch_size": 4},
        "plan": {"backend": "tensorrt", "source": {"recipe": "tiny-bert"}, "sequence_length": 16},
    },
    "endpoints": {"ep": {"kind": "single-model", "models": ["incumbent"], "instance_type": "ml.c5.xlarge"}},
    "environments": {"dev": {"region": "us-east-1"}},
}
AB = [{"name": "A", "weight": 90}, {"name": "B", "model": "candidate", "weight": 10}]


def _load(mutate=None):
    raw = copy.deepcopy(BASE)
    if mutate:
        mutate(raw)
    return parse_spec(raw, pathlib.Path("spec.yaml"))


def _problems(mutate) -> list[str]:
    with pytest.raises(SpecError) as raised:
        _load(mutate)
    return [str(p) for p in raised.value.problems]


def _variant(i: int, key: str, value):
    def mutate(raw):
        raw["endpoints"]["ep"]["variants"][i][key] = value
    return mutate


def with_ab(raw):
    raw["endpoints"]["ep"]["variants"] = copy.deepcopy(AB)


with_shadow = set_path(f"{EP}.shadow", {"model": "candidate"})
ONE_SHADOW = ("one shadow per endpoint, as a mapping of its settings (CreateEndpointConfig: with a shadow, one "
              "variant in ShadowProductionVariants); fix: write shadow: {model: NAME} without the list; to compare "
              "several candidates, list them under variants: instead")
NOT_SME = ("allowed: variants and a shadow on kind: single-model endpoints only (each variant serves one model "
           "repository, built for it as a single-model endpoint)")

CASES = {
    "variants on a multi-model endpoint": (
        all_of(with_ab, set_path(f"{EP}.kind", "multi-model"), set_path(f"{EP}.model_cache", True)),
        f"{EP}.variants: got variants on kind: multi-model; {NOT_SME}; fix: remove variants, or serve the "
        "models it compares from a kind: single-model endpoint"),
    "a shadow on an inference-components endpoint": (
        all_of(with_shadow, set_path(f"{EP}.kind", "inference-components")),
        f"{EP}.shadow: got shadow on kind: inference-components; {NOT_SME}; fix: remove shadow, or serve the "
        "models it compares from a kind: single-model endpoint"),
    "a shadow beside asynchronous": (
        all_of(with_shadow, set_path(f"{EP}.asynchronous", {})),
        f"{EP}.shadow: got shadow beside asynchronous; allowed: variants and a shadow on real-time endpoints only "
        "(an asynchronous endpoint here has one variant: its queue, backlog scaling and answers belong to the "
        "endpoint); fix: remove shadow, or the asynchronous block"),
    "a shadow beside variants": (
        all_of(with_ab, with_shadow),
        f"{EP}.shadow: got a shadow beside 2 variants; allowed: a shadow with exactly one production variant, the "
        "endpoint's own model (CreateEndpointConfig: with ShadowProductionVariants, one variant in "
        "ProductionVariants); fix: remove variants: (the endpoint's model is the production variant), or remove "
        "the shadow"),
    "one variant": (
        set_path(f"{EP}.variants", [{"name": "A"}]),
        f"{EP}.variants: got 1 variant; allowed: 2 to 10 variants (CreateEndpointConfig: ProductionVariants holds "
        "1-10; one is the endpoint itself); fix: remove variants: and serve the one model from the endpoint, or "
        "add the variant to compare it with"),
    "eleven variants": (
        set_path(f"{EP}.variants", [{"name": f"v{i}"} for i in range(11)]),
        f"{EP}.variants: got 11 variants; allowed: 2 to 10 variants (CreateEndpointConfig: ProductionVariants "
        "holds 1-10); fix: keep at most 10, or split them over two endpoints"),
    "two variants of one name": (
        set_path(f"{EP}.variants", [{"name": "A"}, {"name": "a", "model": "candidate"}]),
        f"{EP}.variants[1].name: got 'a'; allowed: a name no other variant of the endpoint has (also 'A'; names "
        "compare case-insensitively here); fix: rename the variant"),
    "every weight 0": (
        set_path(f"{EP}.variants", [{"name": "A", "weight": 0}, {"name": "B", "model": "candidate", "weight": 0}]),
        f"{EP}.variants[0].weight: got every weight 0; allowed: at least one weight above 0 (each variant's share "
        "of the traffic is its weight / the sum of the weights); fix: give the incumbent a weight, e.g. 90, and "
        "the candidate 10"),
    "a negative weight": (
        all_of(with_ab, _variant(1, "weight", -1)),
        f"{EP}.variants[1].weight: got -1; allowed: a number >= 0; fix: set it within 0..any"),
    "an underscore in a variant's name": (
        all_of(with_ab, _variant(1, "name", "a_b")),
        f"{EP}.variants[1].name: got 'a_b'; allowed: 1-63 letters, digits or '-', starting and ending with a "
        "letter or digit; fix: rename it to match"),
    "a 64-character variant name": (
        all_of(with_ab, _variant(1, "name", "b" * 64)),
        f"{EP}.variants[1].name: got '{'b' * 64}'; allowed: 1-63 letters, digits or '-', starting and ending with "
        "a letter or digit; fix: rename it to match"),
    "a variant's unknown model": (
        all_of(with_ab, _variant(1, "model", "candidat")),
        f"{EP}.variants[1].model: got 'candidat'; allowed: a name declared under models: (candidate, incumbent, "
        "plan); fix: did you mean 'candidate'?"),
    "a shadow's unknown model": (
        set_path(f"{EP}.shadow", {"model": "other"}),
        f"{EP}.shadow.model: got 'other'; allowed: a name declared under models: (candidate, incumbent, plan); "
        "fix: declare it under models: or fix the name"),
    "a shadow given as a list": (
        set_path(f"{EP}.shadow", [{"model": "candidate"}, {"model": "incumbent"}]),
        f"{EP}.shadow: got a list; allowed: {ONE_SHADOW}"),
    "a shadow named like the production variant": (
        set_path(f"{EP}.shadow", {"model": "candidate", "name": "alltraffic"}),
        f"{EP}.shadow.name: got 'alltraffic'; allowed: a name other than the production variant's ('AllTraffic', "
        "the endpoint's variant_name; names compare case-insensitively here); fix: rename the shadow, e.g. name: "
        "Candidate"),
    "a variant_name none of the variants has": (
        all_of(with_ab, set_path(f"{EP}.variant_name", "Blue")),
        f"{EP}.variant_name: got 'Blue'; allowed: with variants: the default AllTraffic, or one of the variants' "
        "names (A, B); fix: remove variant_name: each variant names itself"),
    "a variant's unknown instance type": (
        all_of(with_ab, _variant(1, "instance_type", "ml.c5.huge")),
        f"{EP}.variants[1].instance_type: got 'ml.c5.huge'; allowed: a SageMaker real-time instance type (botocore "
        f"{BOTOCORE_VERSION}'s ProductionVariantInstanceType, {len(INSTANCE_TYPES)} types; nearest: ml.c5.large); "
        "fix: use a type this library knows; instance_facts describes only the endpoint's own instance_type"),
    "a variant's scaling bounds reversed": (
        all_of(with_ab, _variant(1, "scaling", {"min_instances": 3, "max_instances": 2})),
        f"{EP}.variants[1].scaling.max_instances: got 2; allowed: an integer >= min_instances (3); fix: raise "
        "max_instances or lower min_instances"),
    "a variant scaling to zero": (
        all_of(with_ab, _variant(1, "scaling", {"min_instances": 0, "max_instances": 2})),
        f"{EP}.variants[1].scaling.min_instances: got 0; allowed: 1 or more on a real-time variant endpoint: an "
        "endpoint scales to zero instances only when it hosts inference components (https://docs.aws.amazon.com/"
        "sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html) or serves asynchronously; fix: raise "
        "min_instances to 1: variants and a shadow serve in real time (the endpoints that scale to zero, "
        "asynchronous and inference-components ones, take none)"),
    "a shadow starting outside its scaling bounds": (
        set_path(f"{EP}.shadow", {"model": "candidate", "initial_instances": 5,
                                  "scaling": {"min_instances": 1, "max_instances": 2}}),
        f"{EP}.shadow.initial_instances: got 5; allowed: an integer within scaling.min_instances.."
        "scaling.max_instances (1..2); fix: move initial_instances into that range or widen the range"),
    "a variant's TensorRT model on the endpoint's CPU type": (
        set_path(f"{EP}.variants", [{"name": "A"}, {"name": "B", "model": "plan"}]),
        f"{EP}.variants[1].instance_type: got 'ml.c5.xlarge'; allowed: a GPU instance type for the TensorRT model "
        "plan; fix: use a GPU instance type such as ml.g5.xlarge"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_mistake_is_refused_with_its_path_and_fix(case):
    mutate, expected = CASES[case]
    found = _problems(mutate)
    assert found == [expected]


def test_a_valid_ab_test_and_a_valid_shadow_load():
    # The twin of every case above: nothing is refused without the mistake.
    spec = _load(all_of(with_ab, _variant(1, "instance_type", "ml.c5.2xlarge"),
                        _variant(1, "scaling", {"min_instances": 1, "max_instances": 3})))
    ep = spec.endpoints["ep"]
    assert describe_weights(ep) == "A 90 %, B 10 %" and build_for(ep, "A") == "ep" and build_for(ep, "B") == "ep.B"
    assert _load(with_shadow).endpoints["ep"].shadow.model == "candidate"


def test_a_problem_of_the_endpoints_own_type_is_reported_once_at_the_endpoint():
    found = _problems(all_of(with_ab, set_path(f"{EP}.instance_type", "ml.c5.huge")))
    assert [p.split(":")[0] for p in found] == [f"{EP}.instance_type"]


def test_a_variant_on_a_gpu_type_serves_the_tensorrt_model():
    # The twin of the TensorRT case: the variant's own GPU type serves the plan.
    spec = _load(set_path(f"{EP}.variants", [{"name": "A"}, {"name": "B", "model": "plan",
                                                                 "instance_type": "ml.g5.xlarge"}]))
    assert sorted(endpoints_to_build(spec)) == ["ep", "ep.B"]


# --- environments: a shadow in staging, a 90/10 A/B in prod, nothing in dev ---------------------------------------

def _environments(raw):
    raw["environments"] = {
        "dev": {"region": "us-east-1"},
        "staging": {"region": "us-east-1", "overrides": {"endpoints": {"ep": {"shadow": {"model": "candidate"}}}}},
        "prod": {"region": "us-east-1", "production": True, "overrides": {"endpoints": {"ep": {
            "initial_instances": 2, "variants": copy.deepcopy(AB)}}}},
    }


def test_overrides_add_a_shadow_in_one_environment_and_variants_in_another():
    spec = _load(_environments)
    envs = {name: env.endpoints["ep"] for name, env in spec.environments.items()}
    assert (envs["dev"].shadow, envs["dev"].variants) == (None, ())
    assert envs["staging"].shadow.model == "candidate" and envs["staging"].variants == ()
    assert [v.name for v in envs["prod"].variants] == ["A", "B"] and envs["prod"].shadow is None
    assert sorted(endpoints_to_build(spec)) == ["ep", "ep.B", "ep.Shadow"]


def test_an_override_removes_the_endpoints_shadow_and_variants():
    def mutate(raw):
        raw["endpoints"]["ep"]["shadow"] = {"model": "candidate"}
        raw["environments"]["prod"] = {"region": "us-east-1", "overrides": {"endpoints": {"ep": {"shadow": None}}}}
        raw["environments"]["test"] = {"region": "us-east-1", "overrides": {"endpoints": {"ep": {
            "shadow": None, "variants": copy.deepcopy(AB)}}}}
    spec = _load(mutate)
    assert spec.endpoints["ep"].shadow is not None and spec.environments["dev"].endpoints["ep"].shadow is not None
    assert spec.environments["prod"].endpoints["ep"].shadow is None
    test = spec.environments["test"].endpoints["ep"]
    assert test.shadow is None and [v.name for v in test.variants] == ["A", "B"]


def test_an_override_that_leaves_a_shadow_beside_variants_is_refused_there():
    # The twin of the removal: variants added without removing the endpoint's shadow.
    def mutate(raw):
        raw["endpoints"]["ep"]["shadow"] = {"model": "candidate"}
        raw["environments"]["prod"] = {"region": "us-east-1", "overrides": {"endpoints": {"ep": {
            "variants": copy.deepcopy(AB)}}}}
    found = _problems(mutate)
    assert [p.split(": got")[0] for p in found] == ["environments.prod.overrides.endpoints.ep.shadow"]


def test_a_production_variant_of_one_instance_is_refused():
    def mutate(raw):
        _environments(raw)
        raw["environments"]["prod"]["overrides"]["endpoints"]["ep"]["variants"][1]["initial_instances"] = 1
    assert _problems(mutate) == [
        "endpoints.ep.variants[1].initial_instances: got 1; allowed: 2 or more in environment prod (production: "
        "true) for every production variant, so that SageMaker can place its instances in different Availability "
        "Zones (AWS Config rule SAGEMAKER_ENDPOINT_CONFIG_PROD_INSTANCE_COUNT); fix: set the variant's "
        "initial_instances and scaling.min_instances to 2 under environments.prod.overrides.endpoints.ep.variants, "
        "or give the endpoint single_instance_reason there"]


def test_a_production_variant_of_two_instances_loads():
    # The twin of the one above.
    def mutate(raw):
        _environments(raw)
        raw["environments"]["prod"]["overrides"]["endpoints"]["ep"]["variants"][1]["initial_instances"] = 2
    assert _load(mutate).environments["prod"].endpoints["ep"].variants[1].initial_instances == 2


def test_one_variant_name_serving_two_models_across_environments_is_refused():
    def mutate(raw):
        _environments(raw)
        raw["environments"]["staging"]["overrides"]["endpoints"]["ep"]["shadow"]["name"] = "B"
        raw["environments"]["prod"]["overrides"]["endpoints"]["ep"]["variants"][1]["model"] = "incumbent"
        raw["environments"]["prod"]["overrides"]["endpoints"]["ep"]["variants"][1]["instance_type"] = "ml.c5.2xlarge"
    assert _problems(mutate) == [
        "environments.prod.overrides.endpoints.ep: got the variant 'B' serving 'incumbent' in environment prod but "
        "'candidate' in environment staging; allowed: one model per variant name in every environment (each variant "
        "with a model of its own is built once, as 'ep.B'); fix: give the variants that serve different models "
        "different names"]


def test_an_override_removes_the_endpoints_variants_with_an_empty_list():
    def mutate(raw):
        with_ab(raw)
        raw["environments"]["dev"] = {"region": "us-east-1", "overrides": {"endpoints": {"ep": {"variants": []}}}}
    spec = _load(mutate)
    assert len(spec.endpoints["ep"].variants) == 2 and spec.environments["dev"].endpoints["ep"].variants == ()
