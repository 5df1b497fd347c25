"""Each rule of inference-component endpoints (deployment_spec/facts/component_rules.py) with a compliant and a
non-compliant case, on plain values, and a check that no rule lacks them (as tests/spec/test_sagemaker_rules.py
does for the endpoint rules)."""
import pytest

from deployment_spec.facts import component_rules as rules

G5_12XL = rules.InstanceCapacity("ml.g5.12xlarge", 4, 48, 192)


def _copy(gpus=1, cpu_cores=4.0, memory_mb=8192, copies=1, component="a"):
    return rules.Demand(component, gpus, cpu_cores, memory_mb, copies)


CASES = {
    "memory_bounds": (lambda: rules.memory_bounds(8192, None), lambda: rules.memory_bounds(8192, 4096),
                      "max_memory_mb: got 4096; allowed: at least memory_mb (8192); fix: raise max_memory_mb or lower "
                      "memory_mb"),
    "copy_bounds": (lambda: rules.copy_bounds(0, 2), lambda: rules.copy_bounds(3, 2),
                    "max_copies: got 2; allowed: an integer >= min_copies (3); fix: raise max_copies or lower "
                    "min_copies"),
    "instance_bounds": (lambda: rules.instance_bounds(0, 1), lambda: rules.instance_bounds(2, 1),
                        "max_instances: got 1; allowed: an integer >= min_instances (2); fix: raise max_instances or "
                        "lower min_instances"),
    "one_per_copy_target": (lambda: rules.one_per_copy_target(None, 4.0), lambda: rules.one_per_copy_target(None, None),
                            "invocations_per_copy: got neither of invocations_per_copy and concurrent_requests_per_copy;"
                            " allowed: exactly one per-copy target (SageMakerInferenceComponentInvocationsPerCopy, or "
                            "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution); fix: keep one: "
                            "invocations per copy per minute, or in-flight requests per copy"),
    "copies_within_scaling": (lambda: rules.copies_within_scaling(1, 0, 2), lambda: rules.copies_within_scaling(0, 1, 2),
                              "copies: got 0; allowed: an integer within scaling.min_copies..scaling.max_copies (1..2); "
                              "fix: move copies into that range or widen the range"),
    "initial_within_instances": (lambda: rules.initial_within_instances(1, 0, 1),
                                 lambda: rules.initial_within_instances(0, 0, 1),
                                 "initial_instances: got 0; allowed: an integer within 1..managed_instances."
                                 "max_instances (1..1); an endpoint starts with at least one instance even when it may "
                                 "scale to zero; fix: move initial_instances into that range or widen "
                                 "managed_instances"),
    "reservation_fits": (lambda: rules.reservation_fits(_copy(gpus=4, cpu_cores=48, memory_mb=192 * 1024), G5_12XL),
                         lambda: rules.reservation_fits(_copy(cpu_cores=64), G5_12XL),
                         "reservation.cpu_cores: got 64; allowed: at most the 48 vCPUs of one ml.g5.12xlarge; fix: "
                         "reserve fewer cores per copy or choose a larger instance type"),
    "copies_placeable": (lambda: rules.copies_placeable([_copy(copies=4)], G5_12XL, 1, "copies", "max_instances"),
                         lambda: rules.copies_placeable([_copy(copies=5)], G5_12XL, 1, "copies", "max_instances"),
                         "copies: got a 5 x 1 = 5 GPUs; allowed: at most 4 GPUs: max_instances (1) x 4 per "
                         "ml.g5.12xlarge; fix: lower copies or the reservations, or raise max_instances"),
    "scale_to_zero": (lambda: rules.scale_to_zero(0, {"a": 0, "b": 0}), lambda: rules.scale_to_zero(0, {"a": 0, "b": 1}),
                      "managed_instances.min_instances: got 0; allowed: 0 only when every component may reach zero "
                      "copies (scaling.min_copies: 0); b keeps 1; fix: set scaling.min_copies: 0 on those components, "
                      "or min_instances to 1 or more"),
    "gpu_models_need_gpus": (lambda: rules.gpu_models_need_gpus(0, True, False),
                             lambda: rules.gpu_models_need_gpus(0, True, True),
                             "reservation.gpus: got 0; allowed: 1 or more for a model with instance_groups of kind "
                             "gpu; fix: reserve a GPU, or use instance_groups kind cpu or auto"),
    "rolling_timeout": (lambda: rules.rolling_timeout(None, 25, 60, 1200), lambda: rules.rolling_timeout(600, 25, 60, 1200),
                        "rolling_update.max_execution_timeout_s: got 600; allowed: at least 5040 s: 4 batch(es) of 25 % "
                        "x (copy start 1200 s + wait_s 60); fix: raise it, or leave it out to have it computed"),
    "default_model_required": (lambda: rules.default_model_required(["pipeline", "pre"], "pipeline"),
                               lambda: rules.default_model_required(["pipeline", "pre"], None),
                               "default_model: got nothing; allowed: one of the archive's models (pipeline, pre); fix: "
                               "name the model callers reach (an ensemble, not one of its steps)"),
    "component_name_valid": (lambda: rules.component_name_valid("Shared-dev-shared-gpu-bert"),
                             lambda: rules.component_name_valid("Shared-dev-shared-gpu-text_classifier"),
                             "name: got the inference component name 'Shared-dev-shared-gpu-text_classifier'; allowed: "
                             "<project>-<environment>-<endpoint>-<model> of 1-63 letters, digits or '-'; fix: rename "
                             "the model or endpoint (no '_') or shorten the project, environment or endpoint name"),
}


@pytest.mark.parametrize("rule", list(CASES))
def test_rule_passes_the_compliant_case_and_names_the_non_compliant_one(rule):
    compliant, non_compliant, message = CASES[rule]
    assert compliant() == []
    assert [str(p) for p in non_compliant()] == [message]


def test_every_rule_of_the_module_has_a_case():
    # A rule added without its two cases fails here; the composer and the arithmetic are covered elsewhere.
    composed = {"placement_problems", "rolling_update_seconds"}
    public = {name for name, value in vars(rules).items() if callable(value) and not name.startswith("_")
              and not isinstance(value, type) and getattr(value, "__module__", "") == rules.__name__}
    assert sorted(public - composed - set(CASES)) == []


def test_placement_reports_one_root_cause():
    too_big = [_copy(gpus=5, copies=3)]
    # A copy that fits no instance is reported alone: its totals would only repeat it.
    assert [p.path for p in rules.placement_problems(too_big, too_big, G5_12XL, 2)] == ["components.a.reservation.gpus"]
    # The maximum is checked only when the initial count fits.
    assert [p.path for p in rules.placement_problems([_copy(copies=9)], [_copy(copies=20)], G5_12XL, 2)] == [
        "components.*.copies"]
