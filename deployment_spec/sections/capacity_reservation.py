"""An ML capacity reservation (a SageMaker training plan reserved for inference) behind an endpoint's variant.

``ProductionVariant.CapacityReservationConfig`` (botocore's SageMaker service model; SageMaker API reference,
ProductionVariantCapacityReservationConfig): ``MlReservationArn`` and ``CapacityReservationPreference``, whose
only value, ``capacity-reservations-only``, makes SageMaker launch the variant's instances only into the
reservation ("If no capacity is available, the instances fail to launch"). A reservation holds one instance
type and a number of instances, which the ARN does not show: the spec states both, so synth can hold the
endpoint to them. No aws_cdk here: the spec and the constructs share it.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import Validated, join, meta

# The API's pattern for an ML reservation (ProductionVariantCapacityReservationSummary.MlReservationArn).
ARN_PATTERN = r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:ml-reservation/.+"
PREFERENCE = "capacity-reservations-only"


@dataclasses.dataclass(frozen=True)
class CapacityReservation(Validated):
    """The reservation the variant's instances launch into.

    Attributes:
        arn: The ML reservation's ARN (``arn:aws:sagemaker:<region>:<account>:ml-reservation/<id>``).
        instance_type: The type the reservation holds; it must be the endpoint's ``instance_type``.
        instances: How many instances it holds: the endpoint's initial count and scaling ceiling stay within.
    """

    arn: str = dataclasses.field(metadata=meta(
        help="the ML reservation's ARN", pattern=ARN_PATTERN,
        pattern_help="arn:aws:sagemaker:<region>:<12-digit account>:ml-reservation/<id>",
        pattern_fix="copy the ARN of the ML reservation (not an EC2 capacity reservation) from the training plan"))
    instance_type: str = dataclasses.field(metadata=meta(help="the instance type the reservation holds"))
    instances: int = dataclasses.field(metadata=meta(help="how many instances the reservation holds",
                                                     minimum=1, maximum=100))

    @property
    def region(self) -> str:
        return self.arn.split(":")[3]


def reservation_problems(reservation: Optional[CapacityReservation], *, instance_type: str,
                         fallbacks: tuple[str, ...] | list[str], initial_instances: int,
                         max_instances: Optional[int], max_field: str = "scaling.max_instances",
                         region: Optional[str] = None) -> list[Problem]:
    """What SageMaker would only find when it launches into the reservation, refused at synth. ``max_field``
    names where the instance ceiling is set (a variant's scaling, or inference components' managed instances)."""
    if reservation is None:
        return []
    where = "capacity_reservation"
    out = []
    if reservation.instance_type != instance_type:
        out.append(Problem(join(where, "instance_type"), repr(reservation.instance_type),
                           f"the endpoint's instance_type {instance_type}: instances launch only into the "
                           f"reservation ({PREFERENCE})", "run the endpoint on the reserved type, or name the "
                           "reservation that holds its type"))
    if fallbacks:
        out.append(Problem("fallback_instance_types", f"{len(fallbacks)} pool(s) with capacity_reservation",
                           f"one of them: with {PREFERENCE} SageMaker launches only into the reservation, so a "
                           "fallback pool would never be used", "remove fallback_instance_types, or the reservation"))
    ceiling = max(initial_instances, max_instances or 0)
    if ceiling > reservation.instances:
        field = max_field if (max_instances or 0) >= initial_instances else "initial_instances"
        out.append(Problem(field, str(ceiling), f"at most the {reservation.instances} instance(s) the reservation "
                           "holds: more fail to launch", f"lower {field.split('.')[-1]}, or reserve more instances"))
    if region and reservation.region != region:
        out.append(Problem(join(where, "arn"), repr(reservation.arn), f"a reservation in the stack's region {region}",
                           "name the reservation made in that region"))
    return out
