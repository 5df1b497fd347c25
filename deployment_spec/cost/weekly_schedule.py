"""The bounds weekly scheduled-scaling actions put in force, minute by minute over a week: what the cost's expected
range averages (deployment_spec.cost.figures). Only weekly AWS cron expressions replay the same way every week; ``rate``,
``at``, a day of the month or a year give None (Application Auto Scaling's schedule expressions,
https://docs.aws.amazon.com/autoscaling/application/userguide/scheduled-scaling-using-cron-expressions.html).
Pure: no boto3, no aws_cdk."""
from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence

from deployment_spec.sections.scheduled_scaling import ScheduledScaling

_WEEK_MINUTES = 7 * 24 * 60
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}  # AWS cron: 1-7 = SUN-SAT


def weekly_bounds(minimum: int, maximum: int, schedules: Sequence[ScheduledScaling]) -> list[tuple[int, int]] | None:
    """The (min, max) in force each minute of a week (Sunday 00:00 first), the schedules replaying every week;
    None when a schedule is not a weekly cron expression (``rate``, ``at``, a day of the month, a year)."""
    fires: list[tuple[list[bool], Optional[int], Optional[int]]] = []
    for schedule in schedules:
        minutes = _weekly_minutes(schedule.schedule)
        if minutes is None:
            return None
        fires.append((minutes, *schedule.bounds))
    low, high = minimum, maximum
    out: list[tuple[int, int]] = []
    for week in range(2):  # the first week settles what the previous week left in force
        for minute in range(_WEEK_MINUTES):
            for fired, s_low, s_high in fires:
                if fired[minute]:
                    low = s_low if s_low is not None else low
                    high = s_high if s_high is not None else high
            if week == 1:
                out.append((low, high))
    return out


def _weekly_minutes(expression: str) -> list[bool] | None:
    match = re.fullmatch(r"cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)", expression.strip())
    if match is None:
        return None
    minute, hour, dom, month, dow, year = match.groups()
    if dom not in ("*", "?") or month != "*" or year != "*":
        return None
    minutes, hours = _field(minute, 0, 59), _field(hour, 0, 23)
    days = {1, 2, 3, 4, 5, 6, 7} if dow in ("*", "?") else _field(dow, 1, 7, _DAYS)
    if minutes is None or hours is None or days is None:
        return None
    out = [False] * _WEEK_MINUTES
    for day in days:
        for h in hours:
            for m in minutes:
                out[(day - 1) * 1440 + h * 60 + m] = True
    return out


def _field(text: str, low: int, high: int, names: Mapping[str, int] | None = None) -> set[int] | None:
    """A cron field's values: ``*``, numbers, names, lists, ranges and steps; None for what is not understood
    (``L``, ``W``, ``#``)."""
    out: set[int] = set()

    def value(part: str) -> int | None:
        if names and part.upper() in names:
            return names[part.upper()]
        return int(part) if part.isdigit() else None

    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                return None
            step = int(step_text)
        if part == "*":
            start, end = low, high
        elif "-" in part:
            a, b = (value(x) for x in part.split("-", 1))
            if a is None or b is None:
                return None
            start, end = a, b
        else:
            v = value(part)
            if v is None:
                return None
            start, end = v, (high if step > 1 else v)
        if not (low <= start <= high and low <= end <= high) or start > end:
            return None
        out.update(range(start, end + 1, step))
    return out
