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
from typing import Optional

from deployment_spec.errors import Problem
from deployment_spec.parse import Validated, join, meta

_SCHEDULE = re.compile(r"cron\((\S+ ){5}\S+\)|rate\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\)"
                       r"|at\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\)")
_NAME = r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}"


@dataclasses.dataclass(frozen=True)
class ScheduledScaling(Validated):
    """One scheduled change of the scaling bounds, e.g. weekday mornings ``min_instances: 2``.

    Attributes:
        name: Unique per endpoint (it names the scheduled action).
        schedule: ``cron(Minutes Hours Day-of-month Month Day-of-week Year)``, ``rate(N unit)`` or ``at(...)``.
        time_zone: IANA time zone of the schedule. Defaults to UTC.
        min_instances, max_instances: The bounds from then on (at least one).
    """

    name: str = dataclasses.field(metadata=meta(help="a name for the schedule", pattern=_NAME,
                                                pattern_help="1-64 letters, digits, '-' or '_'"))
    schedule: str = dataclasses.field(metadata=meta(help="cron(...), rate(...) or at(...)"))
    time_zone: str = "UTC"
    min_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=100))
    max_instances: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=100))

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
        if self.min_instances is None and self.max_instances is None:
            out.append(Problem(join(path, "min_instances"), "neither min_instances nor max_instances",
                               "one or both", "say which bound the schedule sets"))
        return out

    def bounds_problems(self, path: str, min_instances: int, max_instances: int) -> list[Problem]:
        """Against the endpoint's scaling: the bounds in force afterwards must hold (min <= max <= the
        endpoint's max_instances, its ceiling)."""
        low = self.min_instances if self.min_instances is not None else min_instances
        high = self.max_instances if self.max_instances is not None else max_instances
        if low <= high <= max_instances:
            return []
        return [Problem(path, f"bounds {low}..{high} from then on", f"min_instances <= max_instances <= the "
                        f"endpoint's scaling.max_instances ({max_instances})",
                        "lower the schedule's bounds, or raise scaling.max_instances")]
