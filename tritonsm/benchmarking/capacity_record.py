"""`bench load --record`: the measured max RPS under the SLA goes into capacity.json for one endpoint.

The CDK app turns it into the SageMakerVariantInvocationsPerInstance target (RPS x 60 x safety
factor, deployment_spec.capacity.invocations_target) unless the spec sets a value itself.
"""
from __future__ import annotations

import pathlib

from deployment_spec.capacity import Measurement, Target, invocations_target, load_capacity, save_capacity


def record(spec, endpoint: str, measurement: Measurement, path: pathlib.Path) -> tuple[Target | None, str]:
    """Merges the measurement into ``path``; returns the target the app will derive and a note for the user."""
    capacity = load_capacity(path)
    capacity[endpoint] = measurement
    save_capacity(capacity, path)
    ep = spec.endpoints[endpoint]
    target = invocations_target(ep, capacity)
    if target is None:
        note = (f"endpoint {endpoint} has no scaling section, so no invocations policy uses this measurement; "
                "add scaling: {min_instances: 1, max_instances: N} to the spec")
    elif not target.source.startswith("capacity.json"):
        note = (f"the spec sets {target.source.split(': ', 1)[1]} for {endpoint}, which wins over the measurement; "
                "remove scaling.invocations_target / scaling.max_rps_per_instance to use it")
    else:
        note = f"invocations target {target.value:g} per instance per minute ({target.source})"
    return target, note
