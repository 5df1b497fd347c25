"""`bench load --record`: the measured max RPS under the SLA goes into capacity.json for one endpoint.

The CDK app turns it into the SageMakerVariantInvocationsPerInstance target (RPS x 60 x safety
factor), or with ``scaling.load_metric: concurrency`` into the concurrency target (requests in flight
x safety factor) (deployment_spec.cost.capacity.load_target), unless the spec sets a value itself.
"""
from __future__ import annotations

import pathlib

from deployment_spec.cost.capacity import Measurement, Target, load_capacity, load_target, save_capacity


def record(spec, endpoint: str, measurement: Measurement, path: pathlib.Path) -> tuple[Target | None, str]:
    """Merges the measurement into ``path``; returns the target the app will derive and a note for the user."""
    capacity = load_capacity(path)
    capacity[endpoint] = measurement
    save_capacity(capacity, path)
    ep = spec.endpoints[endpoint]
    target = load_target(ep, capacity)
    if ep.scaling is None:
        note = (f"endpoint {endpoint} has no scaling section, so no load policy uses this measurement; "
                "add scaling: {min_instances: 1, max_instances: N} to the spec")
    elif target is None:  # on concurrency, but the measurement has no concurrency (a recommender import)
        note = (f"endpoint {endpoint} scales on concurrency and this measurement has none; set "
                "scaling.concurrent_requests_per_model, or record a load test (tritonsm bench load --record)")
    elif not target.measured:
        fields = ("scaling.concurrent_requests_per_model" if target.metric == "concurrency"
                  else "scaling.invocations_target / scaling.max_rps_per_instance")
        note = (f"the spec sets {target.source.split(': ', 1)[1]} for {endpoint}, which wins over the measurement; "
                f"remove {fields} to use it")
    elif target.metric == "concurrency":
        note = f"concurrency target {target.value:g} requests in flight per model ({target.source})"
    else:
        note = f"invocations target {target.value:g} per instance per minute ({target.source})"
    return target, note

