"""Each SageMaker rule, once: a compliant and a non-compliant case (the cdk-nag way), with the exact words.

The spec validator and the construct library both call these functions; their own tests show the
same words arriving under ``endpoints.<name>.`` (spec) or the prop name (construct).
"""
import pytest

from deployment_spec.facts import images, instances, network_rules
from deployment_spec.rules import sagemaker as rules
from deployment_spec.sections.endpoint import Deployment, Scaling, Strategy

def _t(name: str) -> instances.InstanceType:
    found = instances.lookup(name)
    assert found is not None, name
    return found


CASES = {
    "fallback_instance_types": (lambda: rules.fallback_instance_types("ml.g5.xlarge", ["ml.g6.xlarge"], multi_model=False,
                                                                      triton_version="25.09", volume_size_gb=None),
                                lambda: rules.fallback_instance_types("ml.g5.xlarge", ["ml.g5.12xlarge"],
                                                                      multi_model=False, triton_version="25.09",
                                                                      volume_size_gb=None),
                                "fallback_instance_types[0]: got ml.g5.12xlarge (4 GPU(s)); allowed: a type with the 1 "
                                "GPU(s) of instance_type ml.g5.xlarge: scaling targets and alarms are per GPU x GPUs; "
                                "fix: pick a size with 1 GPU(s)"),
    "concurrency_single_model_only": (lambda: rules.concurrency_single_model_only(False, 4.0),
                                      lambda: rules.concurrency_single_model_only(True, 4.0),
                                      "scaling.concurrent_requests_per_model: got 4 on a multi-model endpoint; "
                                      "allowed: single-model endpoints (inference components: "
                                      "concurrent_requests_per_copy); fix: scale the multi-model endpoint on "
                                      "max_rps_per_instance or invocations_target"),
    "enhanced_metrics_not_multi_model": (lambda: rules.enhanced_metrics_not_multi_model(True, None),
                                         lambda: rules.enhanced_metrics_not_multi_model(True, True),
                                         "observability.enhanced: got true on a multi-model endpoint; allowed: "
                                         "single-model and inference-component endpoints only (EnableEnhancedMetrics); "
                                         "fix: remove observability.enhanced"),
    "triton_version_known": (lambda: rules.triton_version_known("25.09"), lambda: rules.triton_version_known("22.05"),
                             "triton_version: got '22.05'; allowed: a sagemaker-tritonserver release of the SageMaker "
                             f"SDK ({', '.join(images.versions())}); fix: pick one of those tags"),
    "image_in_region": (lambda: rules.image_in_region("25.09", "eu-west-1"),
                        lambda: rules.image_in_region("25.09", "us-gov-west-1"),
                        "region: got 'us-gov-west-1'; allowed: a region with sagemaker-tritonserver:25.09-py3 "
                        f"({', '.join(images.regions('25.09'))}); fix: choose one of those regions or another "
                        "triton_version"),
    "instance_type_known": (lambda: rules.instance_type_known("ml.g5.xlarge"),
                            lambda: rules.instance_type_known("ml.p5.xlarge"),
                            "instance_type: got 'ml.p5.xlarge'; allowed: a SageMaker real-time instance type "
                            "(botocore 1.44.5's ProductionVariantInstanceType, 277 types; nearest: ml.p5.4xlarge, "
                            "ml.p5.48xlarge, ml.r5.xlarge); fix: use one of them; for a type AWS added after botocore "
                            "1.44.5, declare its facts (instance_facts: gpus, compute_capability, vcpus, memory_gib)"),
    "multi_model_family": (lambda: rules.multi_model_family(_t("ml.g4dn.xlarge")),
                           lambda: rules.multi_model_family(_t("ml.p5.48xlarge")),
                           "instance_type: got 'ml.p5.48xlarge'; allowed: a CPU type or a GPU family SageMaker lists "
                           "for multi-model endpoints (p2, p3, g4dn, g5); fix: pick an ml.g5 or ml.g4dn size, or make "
                           "the endpoint single-model"),
    "multi_model_single_gpu": (lambda: rules.multi_model_single_gpu(_t("ml.g5.2xlarge")),
                               lambda: rules.multi_model_single_gpu(_t("ml.g4dn.12xlarge")),
                               "instance_type: got 'ml.g4dn.12xlarge'; allowed: a single-GPU instance type for a "
                               "multi-model endpoint; fix: use a single-GPU size such as ml.g5.2xlarge"),
    "gpu_generation": (lambda: rules.gpu_generation(_t("ml.g4dn.xlarge"), "25.09"),
                       lambda: rules.gpu_generation(_t("ml.p3.2xlarge"), "25.09"),
                       "instance_type: got 'ml.p3.2xlarge'; allowed: a GPU with compute capability >= 7.5 for Triton "
                       "25.09; fix: use ml.g4dn/ml.g5, or triton_version 24.09 or older"),
    "volume_size_without_nvme": (lambda: rules.volume_size_without_nvme(_t("ml.c5.xlarge"), 50),
                                 lambda: rules.volume_size_without_nvme(_t("ml.g5.xlarge"), 50),
                                 "volume_size_gb: got 50; allowed: nothing on ml.g5.xlarge: it has local NVMe storage; "
                                 "fix: remove volume_size_gb"),
    "scalable_instance_type": (lambda: rules.scalable_instance_type(_t("ml.c5.xlarge")),
                               lambda: rules.scalable_instance_type(_t("ml.t2.medium")),
                               "scaling: got auto-scaling on ml.t2.medium; allowed: no auto-scaling on burstable ml.t* "
                               "types; fix: remove scaling or use a non-burstable type such as ml.c5.xlarge"),
    "zero_instances_need_components": (
        lambda: rules.zero_instances_need_components(1), lambda: rules.zero_instances_need_components(0),
        "scaling.min_instances: got 0; allowed: 1 or more on a real-time variant endpoint: an endpoint scales to "
        "zero instances only when it hosts inference components (https://docs.aws.amazon.com/sagemaker/latest/dg/"
        "endpoint-auto-scaling-zero-instances.html) or serves asynchronously; fix: raise min_instances to 1, add an "
        "asynchronous block, or use kind: inference-components with managed_instances.min_instances: 0"),
    "initial_within_bounds": (lambda: rules.initial_within_bounds(2, 1, 4), lambda: rules.initial_within_bounds(5, 1, 4),
                              "initial_instances: got 5; allowed: an integer within "
                              "scaling.min_instances..scaling.max_instances (1..4); fix: move initial_instances into "
                              "that range or widen the range"),
    "gpu_target_on_gpu": (lambda: rules.gpu_target_on_gpu(_t("ml.g5.xlarge"), 60.0),
                          lambda: rules.gpu_target_on_gpu(_t("ml.c5.xlarge"), 60.0),
                          "scaling.gpu_utilization_target: got 60.0; allowed: nothing on the CPU instance type "
                          "ml.c5.xlarge; fix: remove it, or use cpu_utilization_target"),
    "traffic_shift_fits": (lambda: rules.traffic_shift_fits(Strategy.CANARY, 2),
                           lambda: rules.traffic_shift_fits(Strategy.LINEAR, 1),
                           "deployment.strategy: got linear; allowed: all_at_once or auto for a variant that can have "
                           "1 instance: a canary or linear step must be at most 50 % of the variant's instances; fix: "
                           "use strategy all_at_once (blue/green with the bake time and auto-rollback) or auto, or "
                           "give the endpoint 2+ instances (initial_instances, scaling.min_instances)"),
    "execution_timeout_covers": (lambda: rules.execution_timeout_covers(Deployment(max_execution_timeout_s=2400), 1,
                                                                        600, 600),
                                 lambda: rules.execution_timeout_covers(Deployment(max_execution_timeout_s=1200), 1,
                                                                        600, 600),
                                 "deployment.max_execution_timeout_s: got 1200; allowed: at least 1620 s: new fleet "
                                 "start (download_timeout_s 600 + startup_timeout_s 600) + 1 step(s) x wait_s 300 + "
                                 "termination_wait_s 120; fix: raise it, or leave it out to have it computed"),
    "model_cache_multi_model_only": (lambda: rules.model_cache_multi_model_only(True, False),
                                     lambda: rules.model_cache_multi_model_only(False, False),
                                     "model_cache: got false; allowed: true (model caching is a multi-model setting); "
                                     "fix: remove model_cache"),
    "data_capture_single_model_only": (lambda: rules.data_capture_single_model_only(False, True),
                                       lambda: rules.data_capture_single_model_only(True, True),
                                       "data_capture: got a data capture setting; allowed: single-model endpoints "
                                       "only; fix: remove data_capture or make the endpoint single-model"),
    "endpoint_name_valid": (lambda: rules.endpoint_name_valid("Triton-dev-a", "endpoint_name", "x", "y"),
                            lambda: rules.endpoint_name_valid("a_b", "endpoint_name", "'a_b'", "rename it"),
                            "endpoint_name: got 'a_b'; allowed: 1-63 letters, digits or '-' (a SageMaker endpoint "
                            "name); fix: rename it"),
    "container_environment_limits": (lambda: rules.container_environment_limits({"A": "1"}),
                                     lambda: rules.container_environment_limits({"LONG": "x" * 1025}),
                                     "container.environment.LONG: got a value of 1025 bytes; allowed: at most 1024 "
                                     "bytes; fix: shorten it"),
    "network_isolation_reason": (lambda: network_rules.network_isolation_reason(False, "model.py calls an API"),
                                 lambda: network_rules.network_isolation_reason(True, "why not"),
                                 "isolation_opt_out_reason: got 'why not'; allowed: a reason only together with "
                                 "isolation: false; fix: remove it, or set isolation: false"),
    "subnets_in_zones": (lambda: network_rules.subnets_in_zones(2), lambda: network_rules.subnets_in_zones(17),
                         "subnet_ids: got 17 subnets; allowed: 2 to 16 subnets in different availability zones; fix: "
                         "select at most 16 subnets"),
    "vpc_complete": (lambda: network_rules.vpc_complete(2, 1), lambda: network_rules.vpc_complete(2, 0),
                     ": got subnets without security groups or the reverse; allowed: both subnet_ids and "
                     "security_group_ids, or neither; fix: give both lists"),
}


@pytest.mark.parametrize("rule", list(CASES))
def test_rule_passes_the_compliant_case_and_names_the_non_compliant_one(rule):
    compliant, non_compliant, message = CASES[rule]
    assert compliant() == []
    assert [str(p) for p in non_compliant()] == [message]


def test_every_rule_of_the_modules_has_a_case():
    # A rule added without its two cases fails here (the composing functions are covered by the spec and
    # construct tests).
    composed = {"endpoint_problems", "deployment_problems", "prefixed"}
    public = {name for module in (rules, network_rules) for name, value in vars(module).items()
              if callable(value) and not name.startswith("_") and getattr(value, "__module__", "") == module.__name__}
    assert sorted(public - composed - set(CASES)) == []


def test_prefixed_puts_the_spec_path_in_front():
    [problem] = rules.prefixed("endpoints.vision", rules.scalable_instance_type(_t("ml.t2.medium")))
    assert problem.path == "endpoints.vision.scaling"


def test_endpoint_problems_stops_at_an_unknown_instance_type():
    # Every other rule needs the type's facts; one root cause, one problem.
    found = rules.endpoint_problems(instance_type="ml.z9.huge", multi_model=True, triton_version="25.09",
                                    initial_instances=9, scaling=Scaling(), volume_size_gb=5)
    assert [p.path for p in found] == ["instance_type"]
