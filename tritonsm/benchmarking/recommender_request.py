"""An Inference Recommender *advanced* job request for a deployed endpoint, checked offline.

The request is what `aws sagemaker create-inference-recommendations-job --cli-input-json` reads.
It is checked twice against botocore's sagemaker service model (no AWS call, no credentials):
botocore's own ParamValidator (required members, unknown keys, types, minimums; the check the
AWS CLI runs before sending), then the constraints the client leaves to the service (enums,
maximums, regex patterns), so a value such as JobType "ADVANCED" fails here, not minutes later.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

OPERATION = "CreateInferenceRecommendationsJob"
JOB_TYPE = "Advanced"  # the API's enum value (RecommendationJobType: Default | Advanced)
MAX_JOB_SECONDS = 18_000  # API reference: JobDurationInSeconds maximum
VISION_RECIPES = ("resnet50", "tiny-resnet")


class RecommenderRequestError(ValueError):
    """The request would be rejected; the message is botocore's report, or one line per problem."""


@dataclasses.dataclass(frozen=True)
class Phase:
    initial_users: int
    spawn_rate: int
    seconds: int

    def as_api(self) -> dict[str, int]:
        return {"InitialNumberOfUsers": self.initial_users, "SpawnRate": self.spawn_rate,
                "DurationInSeconds": self.seconds}


# The BERT-large scenario's traffic: 2 users, 2 more every minute, 25 minutes.
DEFAULT_PHASES = (Phase(2, 2, 1500),)


def build_request(*, spec, endpoint: str, job_name: str, role_arn: str, model_name: str, endpoint_name: str,
                  sample_payload_url: str, content_type: str, instance_types: list[str],
                  phases: tuple[Phase, ...] = DEFAULT_PHASES, percentile: str = "P99",
                  latency_ms: Optional[int] = None, max_invocations: Optional[int] = None,
                  max_parallel_tests: int = 1) -> dict[str, Any]:
    """The request dict for ``endpoint`` of ``spec``; values not given come from the spec."""
    ep = spec.endpoints[endpoint]
    types = list(dict.fromkeys([ep.instance_type, *instance_types]))
    latency = int(latency_ms if latency_ms is not None else ep.alarms.latency_sla_ms)
    duration = sum(p.seconds for p in phases)
    request = {
        "JobName": job_name,
        "JobType": JOB_TYPE,
        "RoleArn": role_arn,
        "JobDescription": f"Load test of {endpoint} ({spec.project}): {percentile} latency threshold {latency} ms"[:128],
        "InputConfig": {
            "ModelName": model_name,
            # Job time: the traffic phases plus the same again for provisioning the candidate endpoints.
            "JobDurationInSeconds": min(MAX_JOB_SECONDS, 2 * duration),
            "TrafficPattern": {"TrafficType": "PHASES", "Phases": [p.as_api() for p in phases]},
            "ResourceLimit": {"MaxNumberOfTests": len(types), "MaxParallelOfTests": max_parallel_tests},
            "EndpointConfigurations": [{"InstanceType": t} for t in types],
            "ContainerConfig": _container_config(spec, endpoint, sample_payload_url, content_type),
            "Endpoints": [{"EndpointName": endpoint_name}],
        },
        "StoppingConditions": {
            "ModelLatencyThresholds": [{"Percentile": percentile, "ValueInMilliseconds": latency}],
        },
        "Tags": [{"Key": "project", "Value": spec.project}, {"Key": "spec-endpoint", "Value": endpoint}],
    }
    if max_invocations is not None:
        request["StoppingConditions"]["MaxInvocations"] = max_invocations
    return request


def _container_config(spec, endpoint: str, sample_payload_url: str, content_type: str) -> dict[str, Any]:
    recipes = {m.source.recipe for m in spec.served_models(spec.endpoints[endpoint]) if m.source and m.source.recipe}
    vision = bool(recipes) and recipes <= set(VISION_RECIPES)
    return {
        "Domain": "COMPUTER_VISION" if vision else "NATURAL_LANGUAGE_PROCESSING",
        "Task": "IMAGE_CLASSIFICATION" if vision else "TEXT_CLASSIFICATION",
        "Framework": "PYTORCH",
        "PayloadConfig": {"SamplePayloadUrl": sample_payload_url, "SupportedContentTypes": [content_type]},
        "SupportedEndpointType": "RealTime",
    }


def validate(request: dict[str, Any]) -> None:
    """Raises RecommenderRequestError with botocore's message, then with the service-side constraints."""
    from botocore.exceptions import ParamValidationError
    from botocore.validate import ParamValidator

    shape = input_shape()
    report = ParamValidator().validate(request, shape)
    if report.has_errors():
        raise RecommenderRequestError(str(ParamValidationError(report=report.generate_report())))
    problems = service_constraints(request, shape, "")
    if request.get("InputConfig", {}).get("JobDurationInSeconds", 0) > MAX_JOB_SECONDS:
        problems.append(f"InputConfig.JobDurationInSeconds: {request['InputConfig']['JobDurationInSeconds']} is "
                        f"above the API maximum {MAX_JOB_SECONDS}; shorten the traffic phases")
    if problems:
        raise RecommenderRequestError("Request would be rejected by the service:\n" + "\n".join(problems))


def input_shape():
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker").operation_model(OPERATION).input_shape


def service_constraints(value: Any, shape, path: str) -> list[str]:
    """Enum, max and pattern constraints of the service model, which botocore's validator skips."""
    problems: list[str] = []
    where = path or "(request)"
    if shape.type_name == "structure" and isinstance(value, dict):
        for key, member in shape.members.items():
            if key in value:
                problems += service_constraints(value[key], member, f"{path}.{key}" if path else key)
    elif shape.type_name == "list" and isinstance(value, list):
        limit = shape.metadata.get("max")
        if limit is not None and len(value) > limit:
            problems.append(f"{where}: {len(value)} items, at most {limit} allowed")
        for i, item in enumerate(value):
            problems += service_constraints(item, shape.member, f"{path}[{i}]")
    elif shape.type_name == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            allowed = ", ".join(shape.enum) if len(shape.enum) <= 12 else f"one of {len(shape.enum)} values"
            problems.append(f"{where}: {value!r} is not a valid {shape.name} ({allowed})")
        limit = shape.metadata.get("max")
        if limit is not None and len(value) > limit:
            problems.append(f"{where}: {len(value)} characters, at most {limit} allowed")
        pattern = shape.metadata.get("pattern")
        if pattern and not _full_match(pattern, value):
            problems.append(f"{where}: {value!r} does not match the pattern {pattern}")
    elif shape.type_name in ("integer", "long") and isinstance(value, int):
        limit = shape.metadata.get("max")
        if limit is not None and value > limit:
            problems.append(f"{where}: {value} is above the maximum {limit}")
    return problems


def _full_match(pattern: str, value: str) -> bool:
    # The service model uses Java regexes; \p{L} style classes have no `re` equivalent, so such
    # patterns are skipped rather than guessed.
    if "\\p{" in pattern:
        return True
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return True
