"""Scheduled changes of a variant's scaling bounds: office hours up, nights and weekends down.

Application Auto Scaling scheduled actions on the variant's scalable target (PutScheduledAction:
``Schedule`` is ``at(...)``, ``rate(...)`` or a six-field ``cron(...)``, ``Timezone`` an IANA name, and
``ScalableTargetAction`` the new ``MinCapacity`` / ``MaxCapacity``; Application Auto Scaling user guide,
"Scheduled scaling"). No aws_cdk here: the spec and the constructs share it.
"""
from __future__ import annotations

import dataclasses
import re
import zoneinfo
from typing import ClassVar, Optional, Sequence

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import Validated, join, meta

_SCHEDULE = re.compile(r"cron\((\S+ ){5}\S+\)|rate\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\)"
                       r"|at\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\)")
_NAME = r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}"


@dataclasses.dataclass(frozen=True)
class _Schedule(Validated):
    """When a scheduled action runs; the bounds it sets are the subclass's (instances or copies)."""

    name: str = dataclasses.field(metadata=meta(help="a name for the schedule", pattern=_NAME,
                                                pattern_help="1-64 letters, digits, '-' or '_'"))
    schedule: str = dataclasses.field(metadata=meta(help="cron(...), rate(...) or at(...)"))
    time_zone: str = "UTC"

    UNIT: ClassVar[str] = ""  # "instances" or "copies": the bound fields are min_<UNIT> and max_<UNIT>
    OWNER: ClassVar[str] = ""  # whose scaling the schedule changes, for messages

    @property
    def bounds(self) -> tuple[Optional[int], Optional[int]]:
        return getattr(self, f"min_{self.UNIT}"), getattr(self, f"max_{self.UNIT}")

    def problems(self, path: str) -> list[Problem]:
        out = []
        if not _SCHEDULE.fullmatch(self.schedule):
            out.append(Problem(join(path, "schedule"), repr(self.schedule), "cron(m h dom mon dow year) with six "
                               "fields, rate(N minutes|hours|days) or at(yyyy-mm-ddThh:mm:ss)",
                               "e.g. 'cron(0 8 ? * MON-FRI *)' for weekdays at 08:00"))
        zones = zoneinfo.available_timezones()
        if zones and self.time_zone not in zones:
            out.append(Problem(join(path, "time_zone"), repr(self.time_zone), "an IANA time zone name",
                               "e.g. 'Europe/Berlin' or 'UTC'"))
        if self.bounds == (None, None):
            out.append(Problem(join(path, f"min_{self.UNIT}"), f"neither min_{self.UNIT} nor max_{self.UNIT}",
                               "one or both", "say which bound the schedule sets"))
        return out

    def bounds_problems(self, path: str, minimum: int, maximum: int, ceiling_field: str) -> list[Problem]:
        """Against the scaling it changes: the bounds in force afterwards must hold (min <= max <= ``maximum``,
        the scaling's own ceiling, at ``ceiling_field``)."""
        low = self.bounds[0] if self.bounds[0] is not None else minimum
        high = self.bounds[1] if self.bounds[1] is not None else maximum
        if low <= high <= maximum:
            return []
        unit = self.UNIT
        return [Problem(path, f"bounds {low}..{high} from then on", f"min_{unit} <= max_{unit} <= {self.OWNER} "
                        f"{ceiling_field} ({maximum})", f"lower the schedule's bounds, or raise {ceiling_field}")]


@dataclasses.dataclass(frozen=True)
class ScheduledScaling(_Schedule):
    """One scheduled change of a variant's instance bounds, e.g. weekday mornings ``min_instances: 2``.

    Attributes:
        name: Unique per endpoint (it names the scheduled action).
        schedule: ``cron(Minutes Hours Day-of-month Month Day-of-week Year)``, ``rate(N unit)`` or ``at(...)``.
        time_zone: IANA time zone of the schedule. Defaults to UTC.
        min_instances, max_instances: The bounds from then on (at least one).
    """

    min_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=100))
    max_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))

    UNIT: ClassVar[str] = "instances"
    OWNER: ClassVar[str] = "the endpoint's"


@dataclasses.dataclass(frozen=True)
class ScheduledCopies(_Schedule):
    """One scheduled change of an inference component's copy bounds (its scalable target's
    ``sagemaker:inference-component:DesiredCopyCount``), e.g. nights ``max_copies: 1``.

    Attributes:
        name, schedule, time_zone: As ``ScheduledScaling``'s (names unique per component).
        min_copies, max_copies: The bounds from then on (at least one).
    """

    min_copies: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=1000))
    max_copies: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=1000))

    UNIT: ClassVar[str] = "copies"
    OWNER: ClassVar[str] = "the component's"


def schedules_problems(path: str, schedules: Sequence[_Schedule], minimum: int, maximum: int,
                       ceiling_field: str) -> list[Problem]:
    """Unique names, and bounds that hold against the scaling they change."""
    out: list[Problem] = []
    names = [s.name for s in schedules]
    for i, schedule in enumerate(schedules):
        where = join(path, f"schedules[{i}]")
        if names.count(schedule.name) > 1 and names.index(schedule.name) != i:
            out.append(Problem(join(where, "name"), repr(schedule.name), "a name no other schedule has", "rename it"))
        out += schedule.bounds_problems(where, minimum, maximum, ceiling_field)
    return out
